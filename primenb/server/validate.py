"""Request inputs, checked strictly before anything reads a file: bad input is a 400 with a message."""

from __future__ import annotations

import re
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol.rundir import STATES

# trace ids are 10 hex characters today (`new_trace_id`); imported and synthetic ones are word
# characters. Never a path separator, a dot or a wildcard.
TRACE_ID = re.compile(r"^[A-Za-z0-9_-]{4,64}$")
# a metric name, or a prefix ending in "/*" (``reward_errors/*``: one per reward function)
METRIC_KEY = re.compile(r"^[A-Za-z0-9_./-]{1,100}(?:/\*)?$")
OVERRIDE = re.compile(r"^[A-Za-z0-9_\-]+(?:\[\d+\])?(?:\.[A-Za-z0-9_\-]+(?:\[\d+\])?)*=.{0,500}$", re.DOTALL)
RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}$")
MAX_TEXT = 200
MAX_OVERRIDES = 50
MAX_STEPS = 10_000_000


class BadRequest(PrimenbError):
    """Input the server refuses to act on."""


def trace_id(value: str) -> str:
    if not TRACE_ID.fullmatch(value or ""):
        raise BadRequest(f"not a trace id: {value[:80]!r} (4 to 64 letters, digits, '_' or '-')")
    return value


def integer(name: str, raw: str | None, *, default: int | None, lo: int, hi: int) -> int | None:
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw[:40]!r}") from None
    if not lo <= value <= hi:
        raise BadRequest(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def text(name: str, raw: str | None) -> str | None:
    if raw is None or raw == "":
        return None
    if len(raw) > MAX_TEXT or any(ord(c) < 32 for c in raw):
        raise BadRequest(f"{name} must be at most {MAX_TEXT} printable characters")
    return raw


def states(raw: str | None) -> list[str]:
    if not raw:
        return []
    wanted = [s.strip() for s in raw.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STATES]
    if unknown:
        raise BadRequest(f"unknown status {unknown[0][:40]!r}; one of {', '.join(STATES)}")
    return wanted


def metric_keys(raw: str | None) -> list[str]:
    if not raw:
        return []
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    bad = [k for k in keys if not METRIC_KEY.fullmatch(k)]
    if bad or len(keys) > 50:
        raise BadRequest(
            f"keys: at most 50 metric names of letters, digits and _./-, or a prefix ending in /* (bad: {bad[:1]})"
        )
    return keys


def apply_body(body: Any) -> dict[str, Any]:
    """``{"steps": int?, "overrides": ["key=value", ...]?, "name": str?}``"""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object: {steps, overrides, name}")
    extra = set(body) - {"steps", "overrides", "name"}
    if extra:
        raise BadRequest(f"unknown field(s) {', '.join(sorted(extra))}; expected steps, overrides, name")
    steps = body.get("steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= MAX_STEPS):
        raise BadRequest(f"steps must be an integer from 1 to {MAX_STEPS}")
    overrides = body.get("overrides") or []
    if not isinstance(overrides, list) or len(overrides) > MAX_OVERRIDES:
        raise BadRequest(f"overrides must be a list of at most {MAX_OVERRIDES} 'key=value' strings")
    for item in overrides:
        if not isinstance(item, str) or not OVERRIDE.fullmatch(item.strip()):
            raise BadRequest(f"override {str(item)[:80]!r} is not key=value (e.g. trainer.optim.lr=1e-5)")
    name = body.get("name")
    if name is not None and (not isinstance(name, str) or not RUN_NAME.fullmatch(name)):
        raise BadRequest("name must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return {"steps": steps, "overrides": [o.strip() for o in overrides], "name": name}


__all__ = ["TRACE_ID", "BadRequest", "apply_body", "integer", "metric_keys", "states", "text", "trace_id"]
