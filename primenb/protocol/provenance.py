"""Which run directories this installation's engine created: where trust comes from.

Nothing inside a run directory can say where the directory came from: a trace, a status or a
marker file is copied with the folder (an unpacked bundle, a folder copied in and reindexed, a
run synced back from a host). So the engine, when it starts a run on this machine, leaves a record
here, under ``PRIME_HOME/provenance/`` (outside every run directory): the trace id, the resolved
path and the folder's device and inode. A folder is "made here" only while all of them match; a
copy has another path or inode, and a folder written by someone else has no record at all.
`primenb.traces.trust` reads it; ``--trust`` is the only other way up.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from primenb.fsutil import atomic_write_json
from primenb.home import prime_home

FOLDER = "provenance"
MAX_RECORD = 4096  # bytes: a record is a few fields


def _identity(run_dir: str | os.PathLike[str]) -> tuple[str, int, int] | None:
    """The run directory's resolved path, device and inode; None when it is not a directory."""
    try:
        path = Path(run_dir).resolve()
        st = path.stat()
    except (OSError, RuntimeError, ValueError):
        return None
    if not path.is_dir():
        return None
    return str(path), st.st_dev, st.st_ino


def _record_path(trace_id: str, path: str) -> Path:
    key = hashlib.sha256(f"{trace_id}\0{path}".encode("utf-8", "surrogatepass")).hexdigest()
    return prime_home() / FOLDER / f"{key}.json"


def record_engine_run(run_dir: str | os.PathLike[str], trace_id: str) -> None:
    """Called by the engine when it starts (or resumes) the run with ``trace_id`` in ``run_dir``."""
    ident = _identity(run_dir)
    if ident is None or not trace_id:
        return
    path, dev, ino = ident
    target = _record_path(str(trace_id), path)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(target, {"trace_id": str(trace_id), "path": path, "dev": dev, "ino": ino, "at": time.time()})


def made_here(run_dir: str | os.PathLike[str] | None, trace_id: object) -> bool:
    """True when this installation's engine started the run ``trace_id`` in this very folder."""
    if run_dir is None or not isinstance(trace_id, str) or not trace_id:
        return False
    ident = _identity(run_dir)
    if ident is None:
        return False
    path, dev, ino = ident
    target = _record_path(trace_id, path)
    try:
        with open(target, "rb") as f:
            raw = f.read(MAX_RECORD + 1)
        doc = json.loads(raw) if len(raw) <= MAX_RECORD else None
    except (OSError, ValueError):
        return False
    return (
        isinstance(doc, dict)
        and doc.get("trace_id") == trace_id
        and doc.get("path") == path
        and doc.get("dev") == dev
        and doc.get("ino") == ino
    )


__all__ = ["FOLDER", "made_here", "record_engine_run"]
