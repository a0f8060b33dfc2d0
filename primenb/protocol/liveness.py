"""Is the process a launcher started still the same process? Pids and pgids are reused.

The launcher records the engine's pid (its process group id: it starts a new session), the host
and the process's start time (field 22 of ``/proc/PID/stat``, clock ticks since boot). A group
is ours only while it exists and, when its leader is still there, the leader started when ours
did: a reused pgid belongs to a new leader with another start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from typing import Any


def has_proc() -> bool:
    return os.path.exists("/proc/self/stat")


def _ps_start_time(pid: int) -> int | None:
    """Without /proc (macOS, BSD): the start time from ``ps -o lstart=``, in seconds since the
    epoch. Only ever compared with a value taken the same way on the same host."""
    import calendar
    import subprocess
    import time

    try:
        proc = subprocess.run(
            ["ps", "-o", "lstart=", "-p", str(int(pid))],
            capture_output=True,
            text=True,
            timeout=5,
            env={**os.environ, "LC_ALL": "C", "TZ": "UTC"},
        )
        return int(calendar.timegm(time.strptime(" ".join(proc.stdout.split()), "%a %b %d %H:%M:%S %Y")))
    except (OSError, ValueError, subprocess.SubprocessError, OverflowError):
        return None


def start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot from /proc; without /proc, seconds from
    ``ps``); None when unknown (gone)."""
    if not has_proc():
        return _ps_start_time(pid)
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            data = fh.read()
    except (OSError, ValueError):
        return None
    # the command name (field 2) is in parentheses and may hold spaces: split after the last ')'
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])  # field 22 overall
    except (IndexError, ValueError):
        return None


def launch_record(pid: int) -> dict[str, Any]:
    """What launcher.json holds about a process just started in its own session."""
    return {"pgid": pid, "pid": pid, "host": socket.gethostname(), "start_time": start_time(pid)}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31 else None


def group_alive(launcher: dict[str, Any]) -> bool | None:
    """Whether the process group in ``launcher`` (launcher.json) is still the one launched:
    True, False, or None when it cannot be told from here (no pid yet, another host)."""
    pgid = _int(launcher.get("pgid"))
    if pgid is None:
        return None
    if launcher.get("host") not in (None, socket.gethostname()):
        return None
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's group: ours ran as us, so its pgid was reused
    except OSError:
        return None
    recorded = launcher.get("start_time")
    leader = _int(launcher.get("pid")) or pgid
    now = start_time(leader)
    if not has_proc() and (not isinstance(recorded, int) or now is None):
        return None  # without /proc a group cannot be told from a reused one: never call it ours
    # a leader with another start time: the pid was reused, ours is gone. Same leader, or leader
    # gone with members left (a pgid is not reused while its group lives): ours.
    return not (isinstance(recorded, int) and now is not None and now != recorded)


def signal_group(launcher: dict[str, Any], sig: int = signal.SIGTERM) -> bool:
    """Signal the launched group only when it is verifiably ours; True when a signal was sent."""
    if group_alive(launcher) is not True:
        return False
    pgid = _int(launcher.get("pgid"))
    if pgid is None:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
        return True
    return False


__all__ = ["group_alive", "has_proc", "launch_record", "signal_group", "start_time"]
