"""The harness: a durable trace of every run, and what you do with traces.

Every run writes ``RUN_DIR/trace.json`` (identity and lineage, the resolved config, model and
architecture fingerprint, LoRA settings, data hashes, seeds, dependency versions, hardware, git
state, metrics summary, checkpoints). A SQLite index under ``PRIME_HOME/harness/`` lists them;
it is rebuilt from the run directories whenever it is missing or damaged.

Importing this package is cheap: pandas, sqlite and torch load on first use.

>>> import primenb.harness as h
>>> h.traces(last=10)                     # DataFrame, newest first
>>> t = h.get("3fa9")                     # by id, id prefix, run name or run directory
>>> run = h.apply(t, steps=100, overrides=["trainer.optim.lr=1e-5"])
>>> h.diff(t, run.name); h.compare(t, run.name)
>>> h.rerun(t)                            # reproduce; its trace says whether metrics matched
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from primenb.harness.inference import generate, load
    from primenb.harness.refine import apply, rerun
    from primenb.traces.comparison import compare, diff
    from primenb.traces.table import TraceFrame
    from primenb.traces.trace import get
    from primenb.traces.transfer import export, import_, rm


def traces(
    *,
    last: int | None = None,
    status: str | None = None,
    env: str | None = None,
    model: str | None = None,
    where: str | None = None,
) -> TraceFrame:
    """Every trace as a DataFrame, newest first (what ``%prime_harness show`` displays).

    ``status`` (comma-separated states), ``env`` and ``model`` (substrings) filter; ``where`` is
    an SQL expression over the columns, e.g. ``"lr > 1e-4 and best_eval >= 0.5"``."""
    from primenb.traces.table import query

    return query(last=last, status=status, env=env, model=model, where=where)


def reindex(paths: Iterable[str] = ()) -> dict[str, Any]:
    """Rebuild the index from the run directories (and the folders in ``paths``)."""
    from primenb.protocol.index import Index

    return Index().reindex(paths)


def export_to(ref: Any, kind: str) -> dict[str, str]:
    """Backfill tracker ``kind`` (one of `primenb.tracker_kinds.TRACKER_KINDS`) from a trace's stored metrics."""
    from primenb.traces.backfill import backfill

    return backfill(ref, kind)


# handed on as they are: each name is its one declaration's (signature, defaults, help), imported
# on first use so that `import primenb.harness` stays light
_DECLARED_IN = {
    "get": "primenb.traces.trace",
    "apply": "primenb.harness.refine",
    "rerun": "primenb.harness.refine",
    "diff": "primenb.traces.comparison",
    "compare": "primenb.traces.comparison",
    "export": "primenb.traces.transfer",
    "import_": "primenb.traces.transfer",
    "rm": "primenb.traces.transfer",
    "load": "primenb.harness.inference",
    "generate": "primenb.harness.inference",
}


def __getattr__(name: str) -> Any:
    if name in _DECLARED_IN:
        import importlib

        value = getattr(importlib.import_module(_DECLARED_IN[name]), name)
        globals()[name] = value  # once: later lookups find it without this hook
        return value
    raise AttributeError(f"module 'primenb.harness' has no attribute {name!r}")


__all__ = [
    "apply",
    "compare",
    "diff",
    "export",
    "export_to",
    "generate",
    "get",
    "import_",
    "load",
    "reindex",
    "rerun",
    "rm",
    "traces",
]
