"""`%prime_harness export TRACE --to mlflow|trackio|wandb|tensorboard`: replay a past trace's
stored metric rows through the same tracker sinks a live run uses (primenb.trackers), so a run
made before trackers existed, or with them off, gets the same curves."""

from __future__ import annotations

from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol.hashing import redact
from primenb.traces.trace import get
from primenb.trackers import KINDS, TrackerSettings, open_sinks


def backfill(ref: Any, kind: str) -> dict[str, str]:
    """Send ``ref``'s metrics to tracker ``kind``; returns where the tracker run lives."""
    if kind not in KINDS:
        raise PrimenbError(f"unknown tracker {kind!r}: use one of {', '.join(KINDS)}")
    trace = get(ref)
    config = trace.config
    monitors = config.get("monitors")
    wandb = monitors.get("wandb") if isinstance(monitors, dict) else None
    wandb = wandb if isinstance(wandb, dict) else None
    settings = TrackerSettings(
        root=trace.files.trackers_dir,
        name=trace.name,
        trace_id=trace.id,
        trace_path=str(trace.run_dir),
        config=redact(config),  # the trace's config is redacted already; scanned again all the same
        wandb=redact(wandb) if wandb else None,
    )
    fan = open_sinks([kind], settings)
    if not fan.sinks:
        raise PrimenbError("; ".join(fan.warnings) or f"tracker {kind} did not start")
    for row in trace.metric_rows():
        fan.log_row(row)
    final = (trace.summary.get("final_eval") or {}) if isinstance(trace.summary.get("final_eval"), dict) else {}
    where = fan.finish({"eval": final["value"]} if isinstance(final.get("value"), int | float) else {})
    if fan.warnings:
        raise PrimenbError("; ".join(fan.warnings))
    return where.get(kind, {})
