"""Where a trace is served: here, or on the host that trained it (a backend whose capabilities say
``serves_on_host``, e.g. SSH), reached through a forwarded local port. One server serves one host:
traces of different hosts in one call are refused with what to run instead."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.serve import registry


class PlacementError(PrimenbError):
    """Traces that live on different hosts were asked of one server."""


def host_of(trace: Any) -> Any | None:
    """The host that serves ``trace`` (a `Backend.serve_host`), or None for this machine."""
    from primenb.backends import capabilities, get_backend

    backend = trace.get("backend")  # none recorded: the default backend's, served here
    if not capabilities(backend).serves_on_host:
        return None
    return get_backend(str(backend)).serve_host(trace.run_dir)


def where(host: Any | None) -> str:
    return "this machine" if host is None else str(host.describe())


def one_host(traces: list[Any]) -> Any | None:
    """The one host all ``traces`` are served on (None: here); refuses a mix, naming who lives where."""
    hosts: dict[str | None, tuple[Any | None, list[str]]] = {}
    for trace in traces:
        host = host_of(trace)
        key = None if host is None else str(host.key)
        hosts.setdefault(key, (host, []))[1].append(trace.name)
    if len(hosts) > 1:
        parts = "; ".join(f"{', '.join(names)} on {where(h)}" for h, names in hosts.values())
        raise PlacementError(
            f"these traces live on different hosts ({parts}). A trace is served where its checkpoint is, "
            "one server per host: start one %prime_serve per host, each with that host's traces."
        )
    return next(iter(hosts.values()))[0] if hosts else None


def checkpoint_on(host: Any, trace: Any) -> str:
    return str(host.checkpoint(Path(trace.run_dir), trace.final_checkpoint))


def start(
    host: Any, spec: dict[str, Any], *, trace: str, bind: str, port: int, api_key_var: str | None, timeout: float
) -> Any:
    """Start a server for ``spec`` on ``host`` (the host of trace id ``trace``), forwarded to
    ``bind:port`` here, and record it; its registry record. The record names the trace, not the
    SSH options: `reopen` finds the host again from that run's own files."""
    folder = registry.folder()
    log = folder / f"forward-{int(time.time() * 1000)}.log"
    record = host.start(spec, bind=bind, port=port, api_key_var=api_key_var, log=log, timeout=timeout)
    record["url"] = registry.api_url(bind, int(record["port"]))
    record["remote"]["log"] = str(log)
    record["remote"]["trace"] = trace
    key = os.environ.get(api_key_var) if api_key_var else None
    if key:
        record["api_key_check"] = registry.key_check(key)
    registry.write(record)
    return record


def forward_verified(record: dict[str, Any]) -> bool:
    """Whether a remote server's record is backed by the process it names, as a local record is by
    its worker: ``pid`` is our ``ssh -N -L`` with the record's forward spec, and that spec binds the
    record's URL port here and reaches the record's port there. A forged record (any pid, any port)
    is not, so nothing is sent to whatever it names."""
    import urllib.parse

    from primenb.backends.ssh_serve import forward_running

    remote = record.get("remote")
    if not isinstance(remote, dict):
        return False
    spec = str(remote.get("forward") or "")
    parts = spec.rsplit(":", 3)
    try:
        url_port = urllib.parse.urlsplit(str(record.get("url") or "")).port
        local_port, there = int(parts[1]), int(parts[3])
    except (ValueError, IndexError):
        return False
    return (
        len(parts) == 4
        and url_port == local_port
        and there == remote.get("port")
        and forward_running(int(record["pid"]), spec)
    )


def revive(record: dict[str, Any]) -> dict[str, Any]:
    """A remote server whose local forward died gets a new one (same port when free); the record
    as it is now. When the host cannot be reached it stays as it was (``list`` shows it idle)."""
    from primenb.backends.ssh_serve import forward_running

    remote = record.get("remote")
    if not isinstance(remote, dict) or forward_running(int(record["pid"]), str(remote.get("forward") or "")):
        return record
    log = registry.folder() / f"forward-{int(time.time() * 1000)}.log"
    try:
        fresh = reopen(remote).reforward(record, log)
    except PrimenbError:
        return record
    fresh["url"] = registry.api_url(str(fresh["host"]), int(fresh["port"]))
    registry.write(fresh)
    registry.remove(int(record["pid"]))
    return fresh


def current(record: dict[str, Any]) -> dict[str, Any]:
    """The registry's record of the same remote server (its forward may have been renewed since
    ``record`` was read: a new pid and maybe port); ``record`` when it has none."""
    folder = (record.get("remote") or {}).get("dir")
    for rec in registry.records():
        if isinstance(rec.get("remote"), dict) and rec["remote"].get("dir") == folder:
            return rec
    return record


def stop(record: dict[str, Any], timeout: float = 30.0) -> None:
    """Stop a remote server: the worker on its host, then the local forward; drop the record."""
    from primenb.backends.ssh_serve import stop_forward

    record = current(record)
    remote = record.get("remote") or {}
    try:
        reopen(remote).stop(remote, timeout)
    finally:
        stop_forward(int(record["pid"]), str(remote.get("forward") or ""))
    registry.remove(int(record["pid"]))


def reopen(remote: dict[str, Any]) -> Any:
    """The host of a registry record's ``remote`` part: the host of the trace it names, from that
    run's own files (a record is data: its SSH options, Python or key names are never used)."""
    from primenb.traces.trace import get

    found = host_of(get(str(remote.get("trace") or "")))
    if found is None:
        raise PlacementError(f"the trace {remote.get('trace')!r} of this server record is not served on a host")
    return found


def host_key(remote: dict[str, Any] | None) -> str | None:
    return None if remote is None else str(reopen(remote).key)


def describe(record: dict[str, Any]) -> str:
    remote = record.get("remote")
    if not isinstance(remote, dict):
        return "this machine"
    return f"{remote.get('where')} (port {remote.get('port')} there)"


__all__ = [
    "PlacementError",
    "checkpoint_on",
    "current",
    "describe",
    "forward_verified",
    "host_key",
    "host_of",
    "one_host",
    "reopen",
    "start",
    "stop",
    "where",
]
