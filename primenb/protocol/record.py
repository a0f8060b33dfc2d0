"""The trace document (``RUN_DIR/trace.json``): its parts that are read from the run directory.

Pure Python, no torch: the engine uses these to complete a trace, and the harness uses them to
repair a trace whose engine died without completing it (killed, out of memory).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from primenb.protocol.rundir import FINAL_STATES, RunDir, now_iso, read_metrics

TRACE_FILE = "trace.json"
TRACE_VERSION = 1
# metrics that measure wall-clock time: they differ between identical runs
_TIMING_KEYS = frozenset({"time", "step_time", "train_runtime", "eval/time_s"})
CURVE_KEYS = ("reward", "loss")


def new_trace_id() -> str:
    """Short (10 hex characters, 40 random bits), unique, and fixed once written."""
    return secrets.token_hex(5)


def iso_to_epoch(text: str | None) -> float | None:
    """Seconds since the epoch; the UTC offset (``+0100``, ``Z``) is kept, a time without one is
    local time. (Cutting to 19 characters dropped the offset: negative durations across zones.)"""
    if not text or not isinstance(text, str):
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def is_timing_key(key: str) -> bool:
    bare = key.removeprefix("warmup/")
    return bare in _TIMING_KEYS or bare.endswith(("time_s", "/s", "_per_second", "runtime"))


def read_trace(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    try:
        with open(os.path.join(run_dir, TRACE_FILE), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("trace_id") else None


def write_trace(run_dir: str | os.PathLike[str], doc: dict[str, Any]) -> None:
    """Atomically replace trace.json; every write bumps ``revision`` (newest wins in the index)."""
    from primenb.protocol.rundir import atomic_write_json

    doc["revision"] = int(doc.get("revision") or 0) + 1
    doc["updated_at"] = now_iso()
    atomic_write_json(Path(run_dir) / TRACE_FILE, doc)


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
            if not key.startswith(("eval/", "warmup/")):
                final[key] = value
                last_step = step if last_step is None else max(last_step, step)
    evals: dict[str, Any] = {}
    for key, pts in series.items():
        if key.startswith("eval/") and key.endswith(("/reward", "/exact_match")):
            c = _curve(pts, higher_is_better=True)
            evals[key] = {
                "final": c["last"],
                "final_step": c["last_step"],
                "best": c["best"],
                "best_step": c["best_step"],
                "first": c["first"],
                "points": c["points"],
            }
    curves = {}
    for key in (*CURVE_KEYS, "warmup/loss"):
        if series.get(key):
            curves[key] = _curve(series[key], higher_is_better=key == "reward")
    reward_keys = sorted(k for k in evals if k.endswith("/reward"))
    main = reward_keys[0] if reward_keys else None
    return {
        "last_step": last_step,
        "final": final,
        "eval": evals,
        "curves": curves,
        "final_reward": curves["reward"]["last"] if "reward" in curves else None,
        "final_loss": curves["loss"]["last"] if "loss" in curves else None,
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
    return "adapter" if (folder / "adapter_config.json").exists() else "model"


def checkpoints(run_dir: Path) -> list[dict[str, Any]]:
    files = RunDir(run_dir)
    out = [{"step": step, "path": str(path), "kind": checkpoint_kind(path)} for step, path in files.list_checkpoints()]
    warm = files.checkpoints / "sft_warmup"
    if warm.is_dir():
        out.insert(0, {"step": None, "name": "sft_warmup", "path": str(warm), "kind": "model"})
    return out


def final_checkpoint(run_dir: Path, status: dict[str, Any]) -> dict[str, Any] | None:
    path = status.get("final_checkpoint")
    steps = [c for c in checkpoints(run_dir) if c["step"] is not None]
    if path and Path(path).is_dir():
        step = next((c["step"] for c in steps if c["path"] == str(path)), status.get("step"))
        return {"path": str(path), "kind": checkpoint_kind(Path(path)), "step": step}
    if status.get("state") in FINAL_STATES and steps:
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
    state = status.get("state") or doc.get("status")
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
    steps = dict(doc.get("steps") or {})
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
    from primenb.protocol.rundir import FAILED, atomic_write_json, now_iso

    try:
        launcher = json.loads((Path(run_dir) / "launcher.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(launcher, dict) or group_alive(launcher) is not False:
        return None
    status = RunDir(run_dir).read_status()  # it may have just finished
    if status.get("state") in FINAL_STATES:
        return status
    status = {
        **status,
        "state": FAILED,
        "ended_at": now_iso(),
        "error": "the training process ended without writing a final status (killed?); noticed by the harness",
    }
    with contextlib.suppress(OSError):  # a read-only run directory: the trace still records it
        atomic_write_json(RunDir(run_dir).status_path, status)
    return status


def reconcile(doc: dict[str, Any], run_dir: Path) -> bool:
    """A trace left ``queued``/``running`` by an engine that ended without completing it: complete
    it from ``status.json`` (written as failed by whoever noticed the process was gone).
    Returns True when the trace changed (and was written)."""
    if doc.get("status") in FINAL_STATES:
        return False
    status = RunDir(run_dir).read_status()
    if status.get("state") not in FINAL_STATES:
        ended = _record_vanished(run_dir, status)
        if ended is None:
            return False
        status = ended
    complete_from_run_dir(doc, run_dir, status)
    doc["completed_by"] = "harness (the engine ended without completing its trace)"
    try:
        write_trace(run_dir, doc)
    except OSError:
        return False
    return True


__all__ = [
    "TRACE_FILE",
    "TRACE_VERSION",
    "checkpoints",
    "comparable_rows",
    "compare_metrics",
    "complete_from_run_dir",
    "final_checkpoint",
    "is_timing_key",
    "metrics_summary",
    "new_trace_id",
    "read_trace",
    "reconcile",
    "write_trace",
]
