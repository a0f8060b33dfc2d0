"""The launcher's part of a trace: a ``queued`` trace.json written with the run directory, so a
run that never starts still has a trace, and lineage (parent, reproduced trace) reaches the engine."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.backends.base import Lineage
from primenb.protocol.hashing import redact
from primenb.protocol.record import TRACE_VERSION, new_trace_id, write_trace
from primenb.protocol.rundir import RunDir, State, now_iso

if TYPE_CHECKING:
    from primenb.config import Config


def queued_trace(
    run_dir: Path, config: Config, *, name: str, backend: str, lineage: Lineage | None = None
) -> dict[str, Any]:
    """Write and index the first version of ``run_dir/trace.json`` (state ``queued``)."""
    from primenb.protocol.index import index_trace

    lineage = lineage or Lineage()
    settings = config.settings
    try:
        resolved = RunDir(run_dir).read_config()
    except (OSError, ValueError):
        resolved = config.resolved(primenb=True)
    doc: dict[str, Any] = {
        "trace_id": new_trace_id(),
        "trace_version": TRACE_VERSION,
        "parent": lineage.parent,
        "reproduces": lineage.reproduces,
        "reproduces_run_dir": lineage.reproduces_run_dir,
        "name": name,
        "run_dir": str(run_dir.resolve()),
        "backend": backend,
        "host": socket.gethostname() if settings.privacy.record_hostname else None,
        "mode": config.mode,
        "status": State.QUEUED,
        "created_at": now_iso(),
        "created": time.time(),
        "config": redact(resolved),
        "steps": {"start": getattr(settings, "start_step", 0), "last": None, "max": config.max_steps},
        "model": {"id": config.model_name},
    }
    write_trace(run_dir, doc)
    index_trace(doc, run_dir)
    return doc


__all__ = ["queued_trace"]
