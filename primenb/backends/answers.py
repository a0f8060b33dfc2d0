"""What the `prime` CLI prints, read as typed answers: the platform's answers are input.

Each call site gets a small typed value, or `UnexpectedAnswer` naming the command, the field and
what it held, never a `KeyError`/`AttributeError` from deep in a mirror. Unknown *extra* fields
are ignored (a newer platform may add them); a field we need with the wrong type is an error;
run ids must be plain ids, since they go back into `prime` argv and into file names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from primenb.backends.primecli import UPGRADE, PrimeCLIError

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}\Z")


class UnexpectedAnswer(PrimeCLIError):
    kind = "unexpected-answer"


def _fail(command: str, where: str, value: Any, expected: str) -> UnexpectedAnswer:
    shown = repr(value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return UnexpectedAnswer(
        f"prime {command} answered in a shape primenb does not know ({where} should be {expected}, got {shown}); "
        f"is the `prime` CLI older or newer than primenb expects? {UPGRADE}"
    )


def pick(data: dict[str, Any], command: str, *names: str, types: type | tuple[type, ...], default: Any = None) -> Any:
    """The first of ``names`` present in ``data`` (snake or camel case), checked against
    ``types`` (``bool`` never counts as a number); ``default`` when none is present or it is null."""
    for name in names:
        value = data.get(name)
        if value is None:
            continue
        wants_number = (isinstance(types, tuple) and (int in types or float in types)) or types in (int, float)
        if not isinstance(value, types) or (wants_number and isinstance(value, bool)):
            raise _fail(command, name, value, _type_name(types))
        return value
    return default


def _type_name(types: type | tuple[type, ...]) -> str:
    names = [t.__name__ for t in (types if isinstance(types, tuple) else (types,))]
    return {"str": "a string", "int": "an integer", "dict": "an object", "list": "a list"}.get(
        names[0] if len(names) == 1 else "", " or ".join(names)
    )


def obj(data: Any, command: str, key: str | None = None) -> dict[str, Any]:
    """``data[key]`` (or ``data``) as an object; a missing key is an empty object."""
    value = data if key is None else (data or {}).get(key) if isinstance(data, dict) else data
    if value is None and key is not None:
        return {}
    if not isinstance(value, dict):
        raise _fail(command, key or "the answer", value, "an object")
    return value


def items(data: dict[str, Any], command: str, key: str) -> list[dict[str, Any]]:
    """``data[key]`` as a list of objects (entries that are not objects are left out)."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(command, key, value, "a list")
    return [v for v in value if isinstance(v, dict)]


def run_id(value: Any, command: str) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool) or not RUN_ID.match(str(value)):
        raise _fail(command, "runId", value, "a plain run id")
    return str(value)


# -- the answers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Launched:
    """``prime train run|resume -o json``: ``{"run": {"runId", "gpuType", ...}}``."""

    run_id: str | None
    gpu_type: str | None = None
    price_per_gpu_hour: float | None = None
    estimated_cost_per_hour: float | None = None


def launched(out: Any, command: str) -> Launched:
    """The run id first: it is what must be recorded after a billable launch. A missing id is
    ``run_id=None`` (the caller says to check `prime train list`); a malformed one too, with the
    rest of the answer ignored, so nothing here can fail after the platform created the run."""
    created = out.get("run") if isinstance(out, dict) else None
    if not isinstance(created, dict):
        return Launched(None)
    raw = created.get("runId", created.get("id"))
    try:
        rid = run_id(raw, command) if raw not in (None, "") else None
    except UnexpectedAnswer:
        return Launched(None)
    num = (int, float)
    try:
        return Launched(
            rid,
            pick(created, command, "gpuType", "gpu_type", types=str),
            pick(created, command, "pricePerGpuHour", "price_per_gpu_hour", types=num),
            pick(created, command, "estimatedCostPerHour", "estimated_cost_per_hour", types=num),
        )
    except UnexpectedAnswer:
        return Launched(rid)


@dataclass(frozen=True)
class RunRecord:
    """``prime train get ID -o json``: ``{"run": {...}}``."""

    status: str
    runs_ahead: int | None = None
    queue_reason: str | None = None
    error_message: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


def run_record(out: Any, command: str = "train get") -> RunRecord:
    rec = obj(obj(out, command), command, "run")
    return RunRecord(
        status=str(pick(rec, command, "status", types=str, default="")).upper(),
        runs_ahead=pick(rec, command, "runs_ahead", "runsAhead", types=int),
        queue_reason=pick(rec, command, "queue_reason", "queueReason", types=str),
        error_message=pick(rec, command, "error_message", "errorMessage", types=str),
        started_at=pick(rec, command, "started_at", "startedAt", types=str),
        completed_at=pick(rec, command, "completed_at", "completedAt", types=str),
    )


@dataclass(frozen=True)
class Progress:
    latest_step: int | None
    steps_with_samples: list[int] = field(default_factory=list)


def progress(out: Any, command: str = "train progress") -> Progress:
    data = obj(out, command)
    steps = pick(data, command, "steps_with_samples", "stepsWithSamples", types=list, default=[])
    return Progress(
        pick(data, command, "latest_step", "latestStep", types=int),
        [s for s in steps if isinstance(s, int) and not isinstance(s, bool)],
    )


def metrics(out: Any, command: str = "train metrics") -> list[dict[str, Any]]:
    return items(obj(out, command), command, "metrics")


def samples(out: Any, command: str = "train rollouts") -> list[dict[str, Any]]:
    return items(obj(out, command), command, "samples")


@dataclass(frozen=True)
class Checkpoint:
    step: int
    status: str
    storage_url: str


def checkpoints(out: Any, command: str = "train checkpoints") -> list[Checkpoint]:
    found = []
    for c in items(obj(out, command), command, "checkpoints"):
        step = pick(c, command, "step", types=int, default=0)
        found.append(
            Checkpoint(
                step=step,
                status=str(pick(c, command, "status", types=str, default="")).upper(),
                storage_url=pick(c, command, "storage_url", "storageUrl", types=str, default=""),
            )
        )
    return found


@dataclass(frozen=True)
class Offer:
    gpu_type: str | None
    available_now: bool
    price_per_gpu_hour: float | None


def offers(out: Any, command: str = "train models") -> list[Offer]:
    data = obj(out, command)
    key = "on_demand" if "on_demand" in data else "onDemand"
    found = []
    for o in items(data, command, key):
        available = o.get("available_now", o.get("availableNow"))
        found.append(
            Offer(
                pick(o, command, "gpu_type", "gpuType", types=str),
                bool(available) if isinstance(available, bool) else False,
                pick(o, command, "price_per_gpu_hour", "pricePerGpuHour", types=(int, float)),
            )
        )
    return found


def teams(out: Any, command: str = "teams list") -> list[dict[str, str]]:
    return [
        {k: str(t.get(k)) for k in ("teamId", "name", "role") if isinstance(t.get(k), (str, int))}
        for t in items(obj(out, command), command, "teams")
    ]


def id_args(*options: str, ident: str) -> list[str]:
    """``[*options, "--", ident]``: the id after ``--``, so one starting with '-' is never an option."""
    return [*options, "--", ident]


__all__: Sequence[str] = [
    "Checkpoint",
    "Launched",
    "Offer",
    "Progress",
    "RunRecord",
    "UnexpectedAnswer",
    "checkpoints",
    "id_args",
    "launched",
    "metrics",
    "offers",
    "progress",
    "run_id",
    "run_record",
    "samples",
    "teams",
]
