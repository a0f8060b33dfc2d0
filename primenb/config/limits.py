"""Values checked on the TOML as written, whatever their key, before the schema.

A credential in a URL or after a ``--password`` flag rides on an innocent key (``extra_args``,
``base_url``) into config.toml, resolved.json and exports: an error in every mode. An integer
beyond 64 bits and ``nan``/``inf`` are upstream's to judge (tomli reads any integer and pydantic
takes it where no bound refuses it): a located warning, as no 64-bit field (torch, vLLM, JSON
readers in other languages) can hold them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from primenb.config.positions import Path
from primenb.protocol.fields import SETTINGS, path_parts
from primenb.protocol.hashing import has_credential, is_secret_flag

INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ValueProblem:
    path: Path
    code: str
    message: str
    hint: str
    severity: str = "error"


def value_problems(data: Any) -> Iterator[ValueProblem]:
    """Every oversized integer, non-finite number and credential-bearing string in ``data``.
    Iterative, so a deeply nested document cannot exhaust the stack here."""
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        at, node = stack.pop()
        if isinstance(node, dict):
            stack.extend((at + (k,), v) for k, v in node.items())
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if i > 0 and is_secret_flag(node[i - 1]) and isinstance(v, str) and v:
                    yield _credential(at + (i,), f"the argument after `{node[i - 1]}` is a credential")
                else:
                    stack.append((at + (i,), v))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and not -INT64_MAX - 1 <= node <= INT64_MAX:
            yield ValueProblem(
                at,
                "local-limit",
                f"{_short(node)} does not fit in a 64-bit integer: prime-rl takes it, but a 64-bit field "
                "(torch, vLLM, the local engine) cannot hold it; the local engine refuses it at launch",
                f"use a number between {-INT64_MAX - 1} and {INT64_MAX}",
                "warning",
            )
        elif isinstance(node, float) and not math.isfinite(node):
            yield ValueProblem(
                at,
                "local-limit",
                f"{node} is not a finite number: prime-rl takes it where no bound refuses it; "
                "the local engine refuses it at launch",
                "write a finite number (no inf or nan)",
                "warning",
            )
        elif isinstance(node, str) and has_credential(node):
            yield _credential(at, "this value carries a credential (a password in a URL, a token, a secret flag)")


FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class LocalLimit:
    """What the local engine refuses although prime-rl takes it: a warning at validation that
    names the local engine (an error would contradict upstream's verdict, which the config keeps
    for every other backend); the local backend refuses to launch a config with a `local-limit`."""

    path: Path
    message: str
    hint: str
    code: str = "local-limit"  # the local backend refuses to launch; "local-risk": it only warns


def local_limits(model: Any, mode: str, refused_at_launch: bool) -> Iterator[LocalLimit]:
    """Limits of primenb's local engine on a validated (propagated) RL/SFT model; ``refused_at_launch``:
    the backend the config names refuses them (`BackendRules.refuses_local_limits`)."""
    where = ": the local engine refuses it at launch" if refused_at_launch else " (only the local engine refuses it)"
    rl = mode == "rl"
    max_steps = model.trainer.max_steps if rl else model.max_steps
    steps_at: Path = ("trainer", "max_steps") if rl else ("max_steps",)
    if max_steps is not None and max_steps < 1:
        yield LocalLimit(
            steps_at,
            f"max_steps = {max_steps}: the local engine trains at least 1 step{where}",
            "set max_steps >= 1",
        )
    optim = model.trainer.optim if rl else model.optim
    lr_at: Path = tuple(path_parts(SETTINGS["lr"].paths("rl" if rl else "sft")[0]))
    lr = getattr(optim, "lr", None)
    if isinstance(lr, (int, float)) and not isinstance(lr, bool):
        if not math.isfinite(lr) or abs(lr) > FLOAT32_MAX:
            yield LocalLimit(
                lr_at,
                f"lr = {lr:g} overflows the local engine's 32-bit weights{where}",
                "use a learning rate like 1e-5 .. 1e-3",
            )
        elif lr > 1.0:
            yield LocalLimit(
                lr_at,
                f"lr = {lr:g}: weights diverge to inf/nan within a few steps on the local engine",
                "use a learning rate like 1e-5 .. 1e-3",
                "local-risk",
            )
    if rl:
        seq_len = model.trainer.model.seq_len
        sampling = model.orchestrator.train.sampling
        tokens = sampling.max_completion_tokens
        if tokens is not None and seq_len is not None and tokens > seq_len:
            yield LocalLimit(
                ("orchestrator", "train", "sampling", "max_completion_tokens"),
                f"max_completion_tokens ({tokens}) exceeds seq_len ({seq_len}): a completion that long cannot "
                f"fit in the local engine's training sequences{where}",
                f"raise seq_len to at least {tokens} or lower max_completion_tokens to {seq_len} or less",
            )


def _credential(at: Path, message: str) -> ValueProblem:
    return ValueProblem(
        at,
        "secret",
        message + "; secrets never go in a config file",
        "remove it and pass the credential through an environment variable of the launching shell",
    )


def _short(n: int) -> str:
    text = str(n) if n.bit_length() < 10_000 else f"an integer of {n.bit_length()} bits"
    return text if len(text) <= 40 else text[:20] + "..." + text[-8:]


__all__ = ["INT64_MAX", "LocalLimit", "ValueProblem", "local_limits", "value_problems"]
