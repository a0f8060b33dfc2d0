"""What the sidebar's servers section reads and does: the running ``primenb serve`` servers
(``PRIME_HOME/serve/*.json``, through `primenb.serve.registry`) and stopping one (`primenb.serve.client`).

A registry record is a file anyone with access to PRIME_HOME could have written, and a pid can be
reused by another process once its server died without dropping its record: a record is listed
only when its fields have the shapes a server writes and, for a server on this machine, its pid
is still a ``primenb.serve.worker`` process. So no click on "Stop" can signal another program.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from typing import Any

from primenb.protocol.reader import read_bytes, read_json_object
from primenb.server.data import Conflict, NotFound

WORKER = "primenb.serve.worker"  # the module a local server runs (`python -m primenb.serve.worker SPEC`)
MAX_MODELS = 200
MAX_URL = 300


def _is_worker(pid: int) -> bool:
    """Whether ``pid`` runs the serve worker now (its command line, from /proc or ps)."""
    if os.path.isdir("/proc/self"):
        data = read_bytes(f"/proc/{pid}/cmdline", max_bytes=1 << 16)
        return data is not None and WORKER.encode() in data.split(b"\0")
    try:  # no /proc (macOS)
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return False
    return WORKER in out.stdout.split()


def _item(rec: dict[str, Any], now: float) -> dict[str, Any] | None:
    """A record as the sidebar shows it; None when it is not shaped like a live server's."""
    pid, url = rec.get("pid"), rec.get("url")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return None
    if not isinstance(url, str) or not url.startswith(("http://", "https://")) or len(url) > MAX_URL:
        return None
    remote = rec.get("remote")
    if not isinstance(remote, dict) and not _is_worker(pid):  # a reused pid, or not a server at all
        return None
    models = rec.get("models")
    models = [m for m in models if isinstance(m, str)][:MAX_MODELS] if isinstance(models, list) else []
    started = rec.get("started")
    uptime = None
    if isinstance(started, (int, float)) and not isinstance(started, bool) and math.isfinite(started):
        uptime = max(0.0, now - float(started))
    where = remote.get("where") if isinstance(remote, dict) else None
    return {
        "url": url,
        "pid": pid,
        "models": models,
        "uptime_s": uptime,
        "where": str(where) if isinstance(where, str) and where else "this machine",
    }


def _records() -> list[dict[str, Any]]:
    """The registry's records (``registry.folder()/<pid>.json``), read through the safe reader:
    a FIFO, a link, a huge or a wrong-typed file is skipped (`registry.records` blocks on a FIFO
    and fails on a ``started`` that is not a number; `%prime_serve list` drops dead records)."""
    from primenb.serve import registry

    out = []
    for path in sorted(registry.folder().glob("*.json")):
        if path.stem.isdigit():
            rec = read_json_object(path, max_bytes=1 << 20)
            if rec.get("pid") == int(path.stem):
                out.append(rec)
    return out


def list_servers() -> dict[str, Any]:
    """The running servers, oldest first."""
    now = time.time()
    items = [i for i in (_item(rec, now) for rec in _records()) if i is not None]
    items.sort(key=lambda i: -(i["uptime_s"] or 0.0))
    return {"servers": items}


def stop_server(pid: int) -> dict[str, Any]:
    """Stop the server with this pid (one the list shows); returns once it has stopped."""
    from primenb.errors import PrimenbError
    from primenb.serve import client

    shown = {s["pid"]: s for s in list_servers()["servers"]}
    if pid not in shown:
        raise NotFound(f"no running primenb server with pid {pid} (stopped already?); refresh the list")
    try:
        client.find(str(pid)).stop()
    except PrimenbError as exc:
        raise Conflict(f"could not stop the server at {shown[pid]['url']}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:  # the registry could not read another record
        raise Conflict(
            f"could not stop the server at {shown[pid]['url']}: a record under PRIME_HOME/serve is malformed "
            f"({type(exc).__name__}: {exc}); `primenb serve stop {pid}` in a terminal, or remove the bad record"
        ) from None
    return {"pid": pid, "url": shown[pid]["url"], "stopped": True}


def stop_body(body: Any) -> int:
    """``{"pid": N}``: the server to stop."""
    from primenb.server.validate import BadRequest

    if not isinstance(body, dict) or set(body) != {"pid"}:
        raise BadRequest('the body must be the JSON object {"pid": N} of a server the list shows')
    pid = body["pid"]
    if not isinstance(pid, int) or isinstance(pid, bool) or not 1 < pid < 2**31:
        raise BadRequest(f"pid must be a process id (an integer above 1), got {str(pid)[:40]!r}")
    return pid


__all__ = ["list_servers", "stop_body", "stop_server"]
