"""What the sidebar's servers section reads and does: the running ``primenb serve`` servers
(`primenb.serve.registry`, the one reader of their records: it keeps only well-shaped records and,
on this machine, only pids that still run the serve worker, so no click on "Stop" can signal
another program) and stopping one (`primenb.serve.client`).
"""

from __future__ import annotations

import time
from typing import Any

from primenb.server.data import Conflict, NotFound


def _item(rec: dict[str, Any], now: float) -> dict[str, Any]:
    """A registry record as the sidebar shows it."""
    remote = rec.get("remote")
    where = remote.get("where") if isinstance(remote, dict) else None
    return {
        "url": rec["url"],
        "pid": rec["pid"],
        "models": rec["models"],
        "uptime_s": max(0.0, now - rec["started"]) if rec["started"] else None,
        "where": str(where) if isinstance(where, str) and where else "this machine",
    }


def list_servers() -> dict[str, Any]:
    """The running servers, oldest first."""
    from primenb.serve import registry

    now = time.time()
    items = [_item(rec, now) for rec in registry.records()]
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
