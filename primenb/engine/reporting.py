"""The engine's side of the trackers (primenb.trackers): open them from the plan, feed them the
metric rows written to metrics.jsonl, close them with the final eval. Never raises: a tracker
that cannot start or fails later is a warning in run.log and in status.json ``warnings``, which
the monitor shows."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from primenb.protocol.hashing import redact
from primenb.protocol.rundir import RunDir
from primenb.trackers import Fanout, TrackerSettings, open_sinks
from primenb.trackers.sinks import STORE_VAR, records_hostname

log = logging.getLogger("primenb.engine")
MAX_WARNINGS = 8  # one per tracker is the most a run can have; bounded all the same


def open_trackers(
    plan: Any, cfg: dict[str, Any] | None, run_dir: RunDir, trace_id: str | None, status: Any = None
) -> Fanout | None:
    if not plan.report_to:
        return None
    settings = TrackerSettings(
        root=run_dir.trackers_dir,
        name=plan.run_name or run_dir.root.name,
        trace_id=trace_id or "",
        trace_path=str(run_dir.root),
        # the same secret scan as the trace's config; scalars and this config are all a tracker gets
        config=redact(cfg or {}),
        wandb=redact(plan.wandb) if plan.wandb else None,
        record_hostname=records_hostname(cfg),
        # the local backend's shared store; none (the run's own folder) for a remote run
        store=Path(os.environ[STORE_VAR]) if os.environ.get(STORE_VAR) else None,
    )

    def show(warnings: list[str]) -> None:
        if status is not None:
            status.update(warnings=warnings[-MAX_WARNINGS:])

    try:
        fan = open_sinks(list(plan.report_to), settings)
    except Exception as exc:  # never stop a run for a tracker
        log.warning("trackers could not start: %s", exc)
        show([f"trackers could not start ({type(exc).__name__}); the run goes on without them"])
        return None
    fan.on_warning = show
    if fan.warnings:
        show(fan.warnings)
    log.info("trackers: %s", ", ".join(s.kind for s in fan.sinks) or "none started")
    return fan
