"""Which settings the local engine honours, and the run's "not used locally" list. Pure Python.

Every set leaf of a config is in one of three places: read by `build_plan` (recorded as it reads:
`primenb.engine.reads`, so nothing here lists the plan's settings again), in `ELSEWHERE` (primenb
reads it outside the plan: the backend, the monitor, the trace), or neither, and then a config
that sets it (to anything but the schema's default) gets it listed as not used locally.
``tests/engine/test_honoured.py`` walks both schemas and holds every leaf to this.
`ELSEWHERE` patterns are dotted paths with ``[]`` for a list item and ``*`` for any one key.
"""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

from primenb.config.diagnostics import format_path as dotted
from primenb.config.leaves import pattern, set_leaves
from primenb.config.propagate import fed_by
from primenb.config.schema import RLConfig, SFTConfig
from primenb.engine.plan import PlanError, build_plan
from primenb.engine.reads import Reads


class Reader(NamedTuple):
    """Who reads a setting outside the plan: a module (its source names the key) and what for."""

    module: str
    why: str


# read by primenb outside the engine's plan: pattern -> its reader (the test reads each module)
ELSEWHERE: dict[str, Reader] = {
    "output_dir": Reader("primenb.backends.local", "the folder the run directory goes in"),
    "run.dir": Reader("primenb.backends.local", "the run directory"),
    "deployment.num_train_gpus": Reader("primenb.backends.local", "the number of training processes"),
    "primenb.backend": Reader("primenb.backends", "which backend runs the config"),
    "primenb.monitor.*": Reader("primenb.notebook.monitor", "the notebook monitor"),
    "primenb.privacy.record_hostname": Reader("primenb.engine.trace", "the run trace and status"),
    "primenb.privacy.record_git": Reader("primenb.engine.trace", "the run trace"),
}


def matches(spec: str, path: str) -> bool:
    """Whether the pattern path ``path`` is ``spec`` (``*`` in ``spec``: any one key)."""
    want, got = spec.split("."), path.split(".")
    return len(want) == len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=True))


def _under(spec: str, table: str) -> bool:
    """Whether ``spec`` names something inside ``table`` (both patterns)."""
    want, got = spec.split("."), table.split(".")
    return len(want) > len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=False))


def plan_reads(model: RLConfig | SFTConfig) -> frozenset[str]:
    """The settings `build_plan` reads in ``model`` (pattern paths), also when it refuses it. A
    shared setting (``[ckpt]``, ``model.name``) counts as read when a sub-config key it fills is."""
    reads = Reads()
    with contextlib.suppress(PlanError):  # what was read up to a refusal counts: the run fails with its message
        build_plan(model, reads)
    read = set(reads)
    mode = "sft" if isinstance(model, SFTConfig) else "rl"
    for leaf in set_leaves(model):
        path = leaf.path
        if all(isinstance(p, str) for p in path) and any(
            pattern(t) in read for t in fed_by(tuple(str(p) for p in path), mode)
        ):
            read.add(pattern(path))
    return frozenset(read)


def is_honoured(read: frozenset[str], path: str) -> bool:
    """Whether the leaf (a pattern path) is read by the plan (``read``) or elsewhere in primenb."""
    return path in read or any(matches(spec, path) for spec in ELSEWHERE)


def _honours_inside(read: frozenset[str], table: str) -> bool:
    """Whether a present table is read (its presence, as ``[trainer.model.lora]``) or holds a key that is."""
    return table in read or any(_under(spec, table) for spec in (*read, *ELSEWHERE))


def not_used_locally(model: RLConfig | SFTConfig) -> list[str]:
    """The settings of ``model`` that differ from the schema's defaults and that the local engine
    does not honour, as dotted paths (``orchestrator.train.source[0].ratio``). A present table
    nothing of which is honoured is listed once, not key by key; a sub-config value that a shared
    setting filled (``[ckpt]`` into ``[orchestrator.ckpt]``) is left to the shared setting."""
    mode = "sft" if isinstance(model, SFTConfig) else "rl"
    read = plan_reads(model)
    leaves = list(set_leaves(model))
    fed_values: dict[tuple[str | int, ...], Any] = {}  # sub-config key -> the shared value that filled it
    fed_tables: set[tuple[str | int, ...]] = set()
    for leaf in leaves:
        if all(isinstance(p, str) for p in leaf.path):
            for target in fed_by(tuple(str(p) for p in leaf.path), mode):
                if leaf.table:
                    fed_tables.add(target)
                else:
                    fed_values[target] = leaf.value
    out: list[str] = []
    reported: list[tuple[str | int, ...]] = []
    for leaf in leaves:
        if any(leaf.path[: len(r)] == r for r in reported):
            continue
        where = pattern(leaf.path)
        if leaf.table:
            if not _honours_inside(read, where) and leaf.path not in fed_tables:
                out.append(dotted(leaf.path))
                reported.append(leaf.path)
        elif leaf.path in fed_values and fed_values[leaf.path] == leaf.value:
            continue  # a shared setting filled it: judged where the user wrote it
        elif not is_honoured(read, where):
            out.append(dotted(leaf.path))
    return out


__all__ = ["ELSEWHERE", "Reader", "is_honoured", "matches", "not_used_locally", "plan_reads"]
