"""The trace document (``RUN_DIR/trace.json``): its parts that are read from the run directory.

Pure Python, no torch: the engine uses these to complete a trace, and the harness uses them to
repair a trace whose engine died without completing it (killed, out of memory).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from primenb.protocol import metrics as M
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.documents import (
    FINAL_STATES,
    TRACE_VERSION,
    State,
    TraceDoc,
    is_final_state,
    read_document,
    typed,
)
from primenb.protocol.metrics import is_timing_key
from primenb.protocol.rundir import RunDir, now_iso, read_metrics

TRACE_FILE = RunDir.TRACE


def new_trace_id() -> str:
    """Short (10 hex characters, 40 random bits), unique, and fixed once written."""
    return secrets.token_hex(5)


def iso_to_epoch(text: str | None) -> float | None:
    """Seconds since the epoch of an ISO 8601 time stamp, its UTC offset kept (``+0000``,
    ``+05:30``, ``Z``); one without an offset is local time. None when it is not one."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = _dt.datetime.fromisoformat(text.strip())
        return when.timestamp()  # naive: local time, as time.mktime
    except (ValueError, OverflowError, OSError):
        return None


def read_trace(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``run_dir/trace.json`` read safely and typed (`primenb.protocol.documents.TraceDoc`: a
    wrong-typed field is left out, ``.warnings`` says which); None when there is no readable
    trace (missing, not a regular file, too big or deep, no ``trace_id``)."""
    doc, _ = read_trace_checked(run_dir)
    return doc


def read_trace_doc(run_dir: str | os.PathLike[str]) -> TraceDoc | None:
    """`read_trace` as a `TraceDoc`, what a consumer reads fields from (mypy sees each one)."""
    doc = read_trace(run_dir)
    return None if doc is None else typed(TraceDoc, doc)


def read_trace_checked(run_dir: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, str | None]:
    """`read_trace` with the reason when there is none (for the index's skipped list)."""
    doc, why = read_document(TraceDoc, RunDir(run_dir).trace_path)
    if doc is None:
        return None, why
    redact_recorded(doc)
    if not doc.get("trace_id"):
        return None, "it has no trace_id"
    return doc, None


# parts of a trace that can carry a credential the writer did not choose to store: a tracker's
# location is what its library reports (MLFLOW_TRACKING_URI=http://user:pass@host comes back as the
# run's uri), and a config recorded before the secret rule saw `Authorization` headers; redacted
# where a trace is written and where one is read, so an old or copied-in trace shows none either
REDACTED_PARTS = ("trackers", "config")


def redact_recorded(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the secret rule applied to `REDACTED_PARTS` (in place; returned)."""
    from primenb.protocol.hashing import redact

    for part in REDACTED_PARTS:
        if part in doc:
            doc[part] = redact(doc[part])
    return doc


def write_trace(run_dir: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    """Atomically replace trace.json; every write bumps ``revision`` (newest wins in the index)."""
    from primenb.protocol.rundir import atomic_write_json

    redact_recorded(doc)
    revision = doc.get("revision")
    doc["revision"] = (revision if isinstance(revision, int) and not isinstance(revision, bool) else 0) + 1
    doc["updated_at"] = now_iso()
    atomic_write_json(RunDir(run_dir).trace_path, doc)


# ---------------------------------------------------------------------------------------------
# metrics


def _curve(points: list[tuple[int, float]], *, higher_is_better: bool) -> dict[str, Any]:
    values = [v for _, v in points]
    n = len(values)
    k = max(1, n // 5)
    best_i = max(range(n), key=lambda i: values[i]) if higher_is_better else min(range(n), key=lambda i: values[i])
    return {
        "points": n,
        "first_step": points[0][0],
        "last_step": points[-1][0],
        "first": values[0],
        "last": values[-1],
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / n,
        "head_mean": sum(values[:k]) / k,  # mean of the first fifth
        "tail_mean": sum(values[-k:]) / k,  # mean of the last fifth
        "best": values[best_i],
        "best_step": points[best_i][0],
    }


def metrics_summary(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Final values, eval metrics (final and best with their steps) and curve summaries."""
    final: dict[str, Any] = {}
    series: dict[str, list[tuple[int, float]]] = {}
    last_step = None
    for row in rows:
        step = row.get("step")
        if not isinstance(step, int):
            continue
        for key, value in row.items():
            if key == "step" or is_timing_key(key) or not isinstance(value, (int, float)):
                continue
            if isinstance(value, float) and not math.isfinite(value):
                continue
            series.setdefault(key, []).append((step, value))
            if not M.is_warmup_key(key) and not M.is_eval_key(key):
                final[key] = value
                last_step = step if last_step is None else max(last_step, step)
    evals: dict[str, Any] = {}
    for key in M.summarised_evals(series):
        c = _curve(series[key], higher_is_better=M.higher_is_better(key) is not False)
        evals[key] = {
            "final": c["last"],
            "final_step": c["last_step"],
            "best": c["best"],
            "best_step": c["best_step"],
            "first": c["first"],
            "points": c["points"],
        }
    curves = {k: _curve(series[k], higher_is_better=bool(M.higher_is_better(k))) for k in M.summarised_curves(series)}
    reward_keys = M.eval_keys(evals)
    main = reward_keys[0] if reward_keys else None
    # each `Finals` field: the last value under the metric's name, else an alias it was logged as
    finals = {m.final: curves[k]["last"] if (k := M.first_present(m, curves)) else None for m in M.METRICS if m.final}
    return {
        "last_step": last_step,
        "final": final,
        "eval": evals,
        "curves": curves,
        **finals,
        "final_eval": (
            {"key": main, "value": evals[main]["final"], "step": evals[main]["final_step"]} if main else None
        ),
        "best_eval": ({"key": main, "value": evals[main]["best"], "step": evals[main]["best_step"]} if main else None),
    }


def comparable_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Metric rows without the wall-clock keys: what a rerun must reproduce exactly."""
    return [{k: v for k, v in r.items() if not is_timing_key(k)} for r in rows]


def compare_metrics(original: list[dict[str, Any]], again: list[dict[str, Any]]) -> dict[str, Any]:
    """Step-by-step comparison of two runs' metrics (timing keys ignored), exact equality."""
    a, b = comparable_rows(original), comparable_rows(again)
    n = min(len(a), len(b))
    mismatches: list[dict[str, Any]] = []
    max_abs = 0.0
    keys: set[str] = set()
    for i in range(n):
        ra, rb = a[i], b[i]
        keys |= set(ra) | set(rb)
        for key in sorted(set(ra) | set(rb)):
            va, vb = ra.get(key), rb.get(key)
            if va != vb:
                if isinstance(va, (int, float)) and isinstance(vb, (int, float)):
                    max_abs = max(max_abs, abs(va - vb))
                if len(mismatches) < 10:
                    mismatches.append({"row": i, "step": ra.get("step"), "key": key, "original": va, "rerun": vb})
    match = not mismatches and len(a) == len(b) and n > 0
    return {
        "metrics_match": match,
        "rows_compared": n,
        "rows_original": len(a),
        "rows_rerun": len(b),
        "keys_compared": sorted(keys - {"step"}),
        "ignored_keys": "wall-clock timings (time, step_time, tokens/s, eval/time_s, train_runtime, ...)",
        "max_abs_diff": max_abs,
        "mismatches": mismatches,
    }


# ---------------------------------------------------------------------------------------------
# checkpoints


def checkpoint_kind(folder: Path) -> str:
    return CheckpointDir(folder).kind


def checkpoints(run_dir: Path) -> list[dict[str, Any]]:
    files = RunDir(run_dir)
    out = [{"step": step, "path": str(path), "kind": checkpoint_kind(path)} for step, path in files.list_checkpoints()]
    warm = files.warmup_checkpoint
    if warm.is_dir():
        out.insert(0, {"step": None, "name": RunDir.WARMUP_CHECKPOINT, "path": str(warm), "kind": "model"})
    return out


def _inside(path: str, run_dir: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(run_dir))
    except (OSError, ValueError):
        return False


def final_checkpoint(run_dir: Path, status: dict[str, Any]) -> dict[str, Any] | None:
    """The run's final model or adapter: the status's ``final_checkpoint`` when it is a folder
    inside the run directory (a copied or imported status cannot point anywhere else), else the
    last ``checkpoints/step_N`` of a run that ended."""
    path = status.get("final_checkpoint")
    steps = [c for c in checkpoints(run_dir) if c["step"] is not None]
    if isinstance(path, str) and path and _inside(path, run_dir) and Path(path).is_dir():
        step = next((c["step"] for c in steps if c["path"] == str(path)), status.get("step"))
        return {"path": str(path), "kind": checkpoint_kind(Path(path)), "step": step}
    if is_final_state(status.get("state")) and steps:
        last = steps[-1]
        return {"path": last["path"], "kind": last["kind"], "step": last["step"]}
    return None


# ---------------------------------------------------------------------------------------------
# completing a trace from the run directory


def complete_from_run_dir(doc: dict[str, Any], run_dir: Path, status: dict[str, Any]) -> dict[str, Any]:
    """Fill the parts of a trace that the run directory holds: state, times, steps, metrics,
    checkpoints, the final model/adapter, and the error of a failed run."""
    from primenb.protocol.hashing import redact_text

    files = RunDir(run_dir)
    summary = metrics_summary(read_metrics(files.metrics_path))
    state = State.parse(status.get("state")) or State.parse(doc.get("status"))
    doc["status"] = state
    if state in FINAL_STATES:
        doc["finished_at"] = status.get("ended_at") or doc.get("finished_at") or now_iso()
        start = iso_to_epoch(doc.get("started_at") or doc.get("created_at"))
        end = iso_to_epoch(doc["finished_at"])
        wall = status.get("wall_s")
        doc["duration_s"] = (
            float(wall)
            if isinstance(wall, (int, float))
            else round(end - start, 2)
            if start is not None and end is not None
            else None
        )
    steps = dict(doc.get("steps") or {}) if isinstance(doc.get("steps"), dict) else {}
    steps["last"] = status.get("step") if isinstance(status.get("step"), int) else summary["last_step"]
    steps["max"] = status.get("max_steps", steps.get("max"))
    doc["steps"] = steps
    doc["metrics"] = summary
    doc["checkpoints"] = checkpoints(run_dir)
    doc["final"] = final_checkpoint(run_dir, status)
    if status.get("error"):
        doc["error"] = redact_text(str(status["error"]))
        doc["error_type"] = status.get("error_type")
    if status.get("stop_requested"):
        doc["stop_reason"] = status["stop_requested"]
    return doc


def _record_vanished(run_dir: Path, status: dict[str, Any]) -> dict[str, Any] | None:
    """A run whose launched process group is verifiably gone (pgid + start time) while its status
    still says queued/running (``kill -9``): its failed status, written when the folder allows.
    None while it lives or when that cannot be told from here."""
    from primenb.protocol.liveness import group_alive
    from primenb.protocol.rundir import atomic_write_json

    launcher = RunDir(run_dir).read_launcher()
    if not launcher or group_alive(launcher) is not False:
        return None
    status = RunDir(run_dir).read_status()  # it may have just finished
    if is_final_state(status.get("state")):
        return status
    status = {
        **status,
        "state": State.FAILED,
        "ended_at": now_iso(),
        "error": "the training process ended without writing a final status (killed?); noticed by the harness",
    }
    with contextlib.suppress(OSError):  # a read-only run directory: the trace still records it
        atomic_write_json(RunDir(run_dir).status_path, status)
    return status


def current_status(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The one answer to "is it still running": ``status.json`` (typed), its state turned
    ``failed`` when it says queued/running but the launched process group is verifiably gone
    (recorded in the run directory when it can be written; reported either way, so a dead run
    in a read-only or full folder never shows running). Every view reads a run's state here
    (`Run` adds what its own process handle or remote control knows)."""
    status = RunDir(run_dir).read_status()
    if is_final_state(status.get("state")):
        return status
    ended = _record_vanished(Path(run_dir), status)
    return ended if ended is not None else status


def current_state(run_dir: str | os.PathLike[str]) -> State | None:
    """`current_status`'s state (None when status.json has none)."""
    return State.parse(current_status(run_dir).get("state"))


def reconcile(doc: dict[str, Any], run_dir: Path) -> bool:
    """A trace left ``queued``/``running`` by an engine that ended without completing it: complete
    it (in ``doc``) from `current_status`, and write it when the run directory allows.
    Returns True when the trace changed (written or not: a read-only folder keeps the old file,
    the caller's ``doc`` and the index still tell the truth)."""
    if is_final_state(doc.get("status")):
        return False
    status = current_status(run_dir)
    if not is_final_state(status.get("state")):
        return False
    complete_from_run_dir(doc, run_dir, status)
    doc["completed_by"] = "harness (the engine ended without completing its trace)"
    with contextlib.suppress(OSError):
        write_trace(run_dir, doc)
    return True


__all__ = [
    "TRACE_FILE",
    "TRACE_VERSION",
    "checkpoints",
    "comparable_rows",
    "compare_metrics",
    "complete_from_run_dir",
    "current_state",
    "current_status",
    "final_checkpoint",
    "is_timing_key",
    "metrics_summary",
    "new_trace_id",
    "read_trace",
    "read_trace_checked",
    "read_trace_doc",
    "reconcile",
    "redact_recorded",
    "write_trace",
]
