"""Running servers, recorded under ``PRIME_HOME/serve/<pid>.json`` (pid, port, URL, models) so
``list`` and ``stop`` work from any kernel or terminal. A record whose process is gone is dropped,
except a remote server's (``remote``: pid is its local port forward; the worker runs on the host
until `stop`).

This module is the one reader of those records, and it treats them as hostile (anyone with
access to PRIME_HOME can write one, and a pid is reused once its server died): files go through
the safe reader (no FIFO, link or huge file), a record is kept only in the shape a server writes,
and a local record counts as live only while its pid still runs the serve worker, so a stale or
forged record never gets another program signalled."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

from primenb.fsutil import atomic_write_text
from primenb.home import prime_home
from primenb.protocol.reader import read_bytes, read_json_object

WORKER = "primenb.serve.worker"  # the module a server runs (`python -m primenb.serve.worker SPEC`)
MAX_RECORD_BYTES = 1 << 20
MAX_MODELS = 200
MAX_URL = 300


def folder() -> Path:
    path = prime_home() / "serve"
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    """The host part of the URL clients use (``0.0.0.0`` is reached as 127.0.0.1 here)."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


def _path(pid: int) -> Path:
    return folder() / f"{int(pid)}.json"


def write(record: dict[str, Any]) -> None:
    atomic_write_text(_path(record["pid"]), json.dumps(record, indent=1))


def update_models(pid: int, models: list[str]) -> None:
    rec = read(pid)
    if rec is not None and rec.get("models") != models:
        rec["models"] = models
        write(rec)


def read(pid: int) -> dict[str, Any] | None:
    """The record of ``pid`` in the shape a server writes, or None (missing, unreadable, forged)."""
    return _shaped(read_json_object(_path(pid), max_bytes=MAX_RECORD_BYTES), int(pid))


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _shaped(rec: dict[str, Any], pid: int) -> dict[str, Any] | None:
    """``rec`` with its fields checked (pid matches its file, an http(s) URL, model ids as text,
    ``started`` a number): None where a field a client relies on is wrong."""
    url = rec.get("url")
    if rec.get("pid") != pid or isinstance(rec.get("pid"), bool) or pid <= 1:
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > MAX_URL:
        return None
    if "remote" in rec and not isinstance(rec["remote"], dict):
        return None
    models = rec.get("models")
    key_var = rec.get("api_key_var")
    return {
        **rec,
        "models": [m for m in models if isinstance(m, str)][:MAX_MODELS] if isinstance(models, list) else [],
        "started": _number(rec.get("started")) or 0.0,
        "api_key_var": key_var if isinstance(key_var, str) and key_var else None,
    }


def remove(pid: int) -> None:
    with contextlib.suppress(OSError):
        _path(pid).unlink()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)  # a server started from this kernel and exited, not yet reaped


def is_worker(pid: int) -> bool:
    """Whether ``pid`` runs the serve worker now (its command line, from /proc or ps): a pid
    reused by another program since its server died is not one."""
    if os.path.isdir("/proc/self"):
        data = read_bytes(f"/proc/{int(pid)}/cmdline", max_bytes=1 << 16)
        return data is not None and WORKER.encode() in data.split(b"\0")
    try:  # no /proc (macOS)
        out = subprocess.run(["ps", "-o", "command=", "-p", str(int(pid))], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return WORKER in out.stdout.split()


def live_worker(pid: int) -> bool:
    return alive(pid) and is_worker(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def records() -> list[dict[str, Any]]:
    """Live servers, oldest first (see `read` for the shape); the record of a local server whose
    process is gone, or whose pid now runs another program, is removed; a malformed one is skipped."""
    out = []
    for path in folder().glob("*.json"):
        if not path.stem.isdigit():
            continue
        rec = read(int(path.stem))
        if rec is None:
            continue
        # a remote server outlives its forward (pid): its record stays until `stop` ends it there
        if not rec.get("remote") and not live_worker(rec["pid"]):
            remove(rec["pid"])
            continue
        out.append(rec)
    return sorted(out, key=lambda r: r["started"])


__all__ = [
    "WORKER",
    "alive",
    "folder",
    "is_loopback",
    "is_worker",
    "live_worker",
    "read",
    "records",
    "remove",
    "update_models",
    "url_host",
    "write",
]
