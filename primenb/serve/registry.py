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
import functools
import hashlib
import hmac
import ipaddress
import json
import math
import os
import re
import subprocess
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

from primenb.fsutil import atomic_write_text
from primenb.home import prime_home
from primenb.protocol.openai_api import API_ROOT
from primenb.protocol.reader import read_bytes, read_json_object

WORKER = "primenb.serve.worker"  # the module a server runs (`python -m primenb.serve.worker SPEC`)
MAX_RECORD_BYTES = 1 << 20
MAX_MODELS = 200
MAX_URL = 300
MAX_PID = 1 << 22  # Linux's largest pid_max: a bigger "pid" is no process (os.kill would overflow)
KEY_ROUNDS = 200_000
KEY_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
PID_FILE_RE = re.compile(r"^[0-9]{1,7}\.json\Z")  # ASCII digits only: "²".isdigit() is true


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


def api_url(host: str, port: int) -> str:
    """The URL a server listening on ``host:port`` is recorded and reached under."""
    return f"http://{url_host(host)}:{int(port)}{API_ROOT}"


def _path(pid: int) -> Path:
    return folder() / f"{int(pid)}.json"


def write(record: dict[str, Any]) -> None:
    """Write ``record``; one read here (`shaped`) and written back keeps the key variable it was
    recorded with, though this process may not hold that key."""
    record = dict(record)
    recorded = record.pop("recorded_key_var", None)
    if recorded is not None:
        record["api_key_var"] = recorded
    atomic_write_text(_path(record["pid"]), json.dumps(record, indent=1))


def update_models(pid: int, models: list[str]) -> None:
    rec = read(pid)
    if rec is not None and rec.get("models") != models:
        rec["models"] = models
        write(rec)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


class BadRecord(ValueError):
    """A record not in the shape a server writes; the message says which field."""


def _int(value: Any, low: int, high: int, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and low <= value < high:
        return value
    raise BadRecord(f"{what} is not a whole number in [{low}, {high})")  # the value is not echoed


def _text(value: Any, what: str, limit: int = MAX_URL) -> str:
    if isinstance(value, str) and value.isprintable() and len(value) <= limit:
        return value
    raise BadRecord(f"{what} is not short printable text")


def _url(value: Any, keyed: bool) -> str:
    """An http URL of a port here: loopback always; another address only for a server that
    needs a key (primenb never starts a keyless non-loopback server)."""
    url = _text(value, "url")
    parts = urllib.parse.urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None or parts.username or parts.password:
        raise BadRecord("url is not http://HOST:PORT/v1")
    if not (is_loopback(parts.hostname) or keyed):
        raise BadRecord("url is not on this machine (loopback) and the server has no key")
    return url


def _remote(value: Any) -> dict[str, Any]:
    """The remote part, typed: where the server runs there and the trace whose run names the host
    (the SSH options are looked up from that run's own files, never taken from here)."""
    if not isinstance(value, dict):
        raise BadRecord("remote is not a table")
    from primenb.backends import serves_on_host

    kind = value.get("backend")
    if not isinstance(kind, str) or not serves_on_host(kind):
        raise BadRecord("remote backend is not one primenb serves on")
    out: dict[str, Any] = {
        "backend": kind,
        "trace": _text(value.get("trace"), "remote trace", 100),
        "where": _text(value.get("where", ""), "remote where"),
        "dir": _text(value.get("dir"), "remote dir"),
        "pid": _int(value.get("pid"), 2, MAX_PID, "remote pid"),
        "port": _int(value.get("port"), 1, 65536, "remote port"),
        "forward": _text(value.get("forward"), "remote forward", 100),
    }
    if isinstance(value.get("log"), str):
        out["log"] = _text(value["log"], "remote log", 4096)
    return out


def key_check(value: str) -> dict[str, str]:
    """What a record keeps of its server's key: a salted slow hash, so a client sends the named
    variable's value only when it is that key (a forged record naming HF_TOKEN gets nothing)."""
    salt = os.urandom(16).hex()
    return {"salt": salt, "hash": _key_hash(salt, value)}


@functools.lru_cache(maxsize=64)
def _key_hash(salt: str, value: str) -> str:
    return hashlib.pbkdf2_hmac("sha256", value.encode(), bytes.fromhex(salt), KEY_ROUNDS).hex()


def _key_var(rec: dict[str, Any]) -> str | None:
    """The record's key variable when its value here is the key the server was started with."""
    name, check = rec.get("api_key_var"), rec.get("api_key_check")
    if name is None:
        return None
    if not isinstance(name, str) or not KEY_VAR_RE.match(name):
        raise BadRecord("api_key_var is not a variable name")
    value = os.environ.get(name)
    if not value or not isinstance(check, dict):
        return None
    salt, digest = check.get("salt"), check.get("hash")
    if not (isinstance(salt, str) and re.fullmatch(r"[0-9a-f]{32}", salt) and isinstance(digest, str)):
        return None
    return name if hmac.compare_digest(_key_hash(salt, value), digest) else None


def shaped(rec: Any, pid: int) -> dict[str, Any]:
    """``rec`` typed as a server writes it (bounded ints, a URL of a port here, model ids as text,
    a typed remote part); `BadRecord` says what is wrong. ``api_key_var`` is kept only while that
    variable holds the server's own key (see `key_check`)."""
    if not isinstance(rec, dict):
        raise BadRecord("not a JSON object")
    if _int(rec.get("pid"), 2, MAX_PID, "pid") != pid:
        raise BadRecord("its pid is not the one in its file name")
    key_var = _key_var(rec)
    out: dict[str, Any] = {
        "pid": pid,
        # another address only when this process holds the server's key: a forged record cannot
        # point `serve list` at a host of its choosing
        "url": _url(rec.get("url"), keyed=key_var is not None),
        "models": [m for m in rec.get("models") or [] if isinstance(m, str) and len(m) <= MAX_URL][:MAX_MODELS]
        if isinstance(rec.get("models"), list)
        else [],
        "started": _number(rec.get("started")) or 0.0,
        "api_key_var": key_var,
    }
    if isinstance(rec.get("api_key_var"), str):  # what was recorded, written back as is (`write`)
        out["recorded_key_var"] = rec["api_key_var"]
    if isinstance(rec.get("api_key_check"), dict):
        out["api_key_check"] = rec["api_key_check"]
    for field in ("host", "port"):
        if field in rec:
            out[field] = _text(rec[field], "host", 255) if field == "host" else _int(rec[field], 0, 65536, "port")
    if "remote" in rec:
        out["remote"] = _remote(rec["remote"])
    return out


def read(pid: int) -> dict[str, Any] | None:
    """The record of ``pid`` in the shape a server writes, or None (missing, unreadable, forged)."""
    try:
        return shaped(read_json_object(_path(pid), max_bytes=MAX_RECORD_BYTES), int(pid))
    except BadRecord:
        return None


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
    """Live servers, oldest first (see `shaped`); the record of a local server whose process is
    gone, or whose pid now runs another program, is removed; a malformed file is skipped with a
    warning, never breaking the list of the others."""
    out = []
    for path in sorted(folder().iterdir()):
        if not path.name.endswith(".json") or path.name.startswith(("spec-", "ready-")):
            continue
        try:
            if not PID_FILE_RE.match(path.name):
                raise BadRecord("its name is not <pid>.json")
            pid = int(path.name[:-5])
            rec = shaped(read_json_object(path, max_bytes=MAX_RECORD_BYTES), pid)
        except BadRecord as exc:
            warnings.warn(f"skipping the server record {ascii(path.name)[1:-1]}: {exc}", stacklevel=2)
            continue
        # a remote server outlives its forward (pid): its record stays until `stop` ends it there
        if "remote" not in rec and not live_worker(rec["pid"]):
            remove(rec["pid"])
            continue
        out.append(rec)
    return sorted(out, key=lambda r: r["started"])


__all__ = [
    "WORKER",
    "BadRecord",
    "alive",
    "api_url",
    "folder",
    "is_loopback",
    "is_worker",
    "key_check",
    "live_worker",
    "read",
    "records",
    "remove",
    "shaped",
    "update_models",
    "url_host",
    "write",
]
