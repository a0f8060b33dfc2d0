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

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from primenb.run import Run
    from primenb.traces.comparison import Comparison, TraceDiff
    from primenb.traces.table import TraceFrame
    from primenb.traces.trace import Trace


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


def get(ref: Any) -> Trace:
    """A `Trace` by id, unique id prefix, run name, run directory, or `Run`."""
    from primenb.traces.trace import get as _get

    return _get(ref)


def apply(
    ref: Any,
    *,
    steps: int | None = None,
    overrides: Sequence[str] = (),
    backend: str | None = None,
    name: str | None = None,
    yes: bool = False,
    trust: bool = False,
) -> Run:
    """Continue a trace from its final checkpoint with its config plus ``overrides`` (a hosted
    trace: on the platform, billed, so only with ``yes``). An imported trace whose config names
    an environment not registered here is refused until ``trust``."""
    from primenb.harness.refine import apply as _apply

    return _apply(ref, steps=steps, overrides=overrides, backend=backend, name=name, yes=yes, trust=trust)


def rerun(ref: Any, *, backend: str | None = None, name: str | None = None, trust: bool = False) -> Run:
    """Re-execute a trace from scratch; its new trace records whether the metrics matched. An
    imported trace whose config names an environment not registered here is refused until ``trust``."""
    from primenb.harness.refine import rerun as _rerun

    return _rerun(ref, backend=backend, name=name, trust=trust)


def diff(*refs: Any) -> TraceDiff:
    """What differs between traces: config, model, environment, data, seeds, deps, hardware."""
    from primenb.traces.comparison import diff as _diff

    return _diff(*refs)


def compare(*refs: Any, metrics: Sequence[str] | None = None) -> Comparison:
    """Metric curves of traces overlaid (SVG charts, one per metric), with a summary table."""
    from primenb.traces.comparison import compare as _compare

    return _compare(*refs, metrics=metrics)


def reindex(paths: Iterable[str] = ()) -> dict[str, Any]:
    """Rebuild the index from the run directories (and the folders in ``paths``)."""
    from primenb.protocol.index import Index

    return Index().reindex(paths)


def export(ref: Any, path: str) -> Path:
    """A self-contained folder: config, trace, metrics, final model or adapter."""
    from primenb.traces.transfer import export as _export

    return _export(ref, path)


def export_to(ref: Any, kind: str) -> dict[str, str]:
    """Backfill tracker ``kind`` (one of `primenb.tracker_kinds.TRACKER_KINDS`) from a trace's stored metrics."""
    from primenb.traces.backfill import backfill

    return backfill(ref, kind)


def import_(path: str, dest: str | None = None) -> Trace:
    """Bring an exported trace back as a run directory (same trace id) and index it."""
    from primenb.traces.transfer import import_ as _import

    return _import(path, dest)


def rm(ref: Any, *, files: bool = False) -> str:
    """Remove a trace (and with ``files=True`` its run directory)."""
    from primenb.traces.transfer import rm as _rm

    return _rm(ref, files=files)


def load(ref: Any, *, checkpoint: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a trace's final checkpoint, adapter applied."""
    from primenb.harness.inference import load as _load

    return _load(ref, checkpoint=checkpoint, device=device)


def generate(ref: Any, prompts: Any, **sampling: Any) -> Any:
    """Completions from a trace's model (greedy by default; see `primenb.engine.inference`)."""
    from primenb.harness.inference import generate as _generate

    return _generate(ref, prompts, **sampling)


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
