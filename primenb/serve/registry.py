"""Running servers, recorded under ``PRIME_HOME/serve/<pid>.json`` (pid, port, URL, models) so
``list`` and ``stop`` work from any kernel or terminal. A record whose process is gone is dropped,
except a remote server's (``remote``: pid is its local port forward; the worker runs on the host
until `stop`)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
from pathlib import Path
from typing import Any

from primenb.fsutil import atomic_write_text
from primenb.home import prime_home


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
    try:
        doc = json.loads(_path(pid).read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) else None


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


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def records() -> list[dict[str, Any]]:
    """Live servers, oldest first; records of dead processes are removed."""
    out = []
    for path in folder().glob("*.json"):
        if not path.stem.isdigit():
            continue
        rec = read(int(path.stem))
        if rec is None or not isinstance(rec.get("pid"), int):
            continue
        # a remote server outlives its forward (pid): its record stays until `stop` ends it there
        if not alive(rec["pid"]) and not rec.get("remote"):
            remove(rec["pid"])
            continue
        out.append(rec)
    return sorted(out, key=lambda r: float(r.get("started") or 0))


__all__ = ["alive", "folder", "is_loopback", "read", "records", "remove", "update_models", "url_host", "write"]
