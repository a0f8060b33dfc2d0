"""Serving a trace on the SSH host that trained it (its checkpoint is there).

`SSHServeHost.start` sends the server's spec over the run's SSH connection, starts
``python -m primenb.serve.worker`` there with the host's Python (the one that trained), bound to
127.0.0.1 of the host, in a private folder made by ``mktemp -d``, under ``setsid nohup`` (it
outlives the connection and the kernel, like a local server). Then a local ``ssh -N -L`` process of
its own (not the control master, which closes with the kernel) forwards ``127.0.0.1:P`` here to
the worker's port there, so the notebook's URL is still ``http://127.0.0.1:P/v1``. ``stop`` ends
the worker (SIGTERM, then SIGKILL), removes its folder and ends the forward.

Every answer from the host (the folder, the ready file, pids, ports) is checked before use.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path, PurePosixPath
from typing import Any

from primenb.backends.remote import read_remote
from primenb.backends.sshchannel import SSHChannel, env_exports, target_of
from primenb.backends.sshconn import SSHError, quote
from primenb.commands import ServeStartArgs
from primenb.errors import PrimenbError

# What a registry record keeps of the host (no secrets: ssh options and names only).
_TARGET_KEYS = ("host", "user", "port", "ssh_args", "connect_timeout", "python", "env_names")
# mktemp's folder on the host: the only remote path a stop removes.
_DIR_RE = re.compile(r"^/[A-Za-z0-9._/-]*/primenb-serve\.[A-Za-z0-9]{6,}$")
_MARK = "primenb-serve-dir="
FORWARD_TRIES = 3


class ServeHostError(PrimenbError):
    """The server on the SSH host could not start, answer or stop; the message says what to do."""


def _port(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
        return value
    raise ServeHostError(f"the host answered {value!r} where a port number (1-65535) belongs")


def _pid(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 1 < value < 1 << 22:
        return value
    raise ServeHostError(f"the host answered {value!r} where a process id belongs")


def _folder(value: Any) -> str:
    if isinstance(value, str) and _DIR_RE.match(value) and ".." not in value.split("/"):
        return value
    raise ServeHostError(f"the host answered {value!r} where its server folder (mktemp -d) belongs")


def _printable(text: str, limit: int = 2000) -> str:
    return "".join(c if c.isprintable() or c == "\n" else "?" for c in text[-limit:])


def start_script(spec: dict[str, Any], python: str, exports: str) -> str:
    """The host's side of a start: a private folder, the spec, the worker detached from this
    connection; prints the folder. Sent on stdin, so the exported values never show in a process list."""
    argv = quote(python, "-m", "primenb.serve.worker", "spec.json")
    return f"""set -e
umask 077
d=$(mktemp -d "${{TMPDIR:-/tmp}}/primenb-serve.XXXXXXXX")
cd "$d"
printf '%s\\n' {quote(json.dumps(spec))} > spec.json
{exports}
export PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1
if command -v setsid >/dev/null 2>&1; then S=setsid; else S=; fi
$S nohup sh -c 'echo $$ > worker.pid; exec "$@"' primenb-serve {argv} > server.log 2>&1 < /dev/null &
echo "{_MARK}$d"
"""


def poll_script(folder: str) -> str:
    return f"""cd {quote(folder)} || {{ echo GONE; exit 0; }}
if [ -s ready.json ]; then echo READY; cat ready.json; exit 0; fi
pid=$(cat worker.pid 2>/dev/null || true)
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo WAIT; exit 0; fi
echo DEAD; tail -c 2000 server.log 2>/dev/null
"""


def stop_script(folder: str, wait_s: float) -> str:
    """End the worker of ``folder`` (only a process whose command line is the serve worker) and
    remove the folder."""
    rounds = max(1, int(wait_s / 0.2))
    return f"""d={quote(folder)}
[ -d "$d" ] || {{ echo stopped; exit 0; }}
pid=$(cat "$d/worker.pid" 2>/dev/null || true)
case "$pid" in ''|*[!0-9]*) pid=;; esac
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    if [ ! -r "/proc/$pid/cmdline" ] || tr '\\000' ' ' < "/proc/$pid/cmdline" | grep -q primenb.serve.worker; then
        kill -TERM "$pid" 2>/dev/null || true
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt {rounds} ]; do sleep 0.2; i=$((i+1)); done
        kill -KILL "$pid" 2>/dev/null || true
    fi
fi
rm -rf "$d"
echo stopped
"""


def _free_port(bind: str, port: int = 0) -> int | None:
    """``port`` (0: any) if nothing listens there now, else None. Checked before ssh binds it: a
    connection to the port would otherwise reach whoever holds it and pass for ours."""
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as ssh binds: TIME_WAIT is no owner
        try:
            sock.bind((bind, port))
        except OSError:
            return None
        return int(sock.getsockname()[1])


def forward_spec(bind: str, local_port: int, remote_port: int) -> str:
    host = f"[{bind}]" if ":" in bind else bind
    return f"{host}:{local_port}:127.0.0.1:{remote_port}"


def forward_running(pid: int, spec: str) -> bool:
    """``pid`` is our ``ssh -N -L spec`` (not a process that reused the pid)."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        with open(f"/proc/{int(pid)}/stat") as f:
            zombie = f.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except (OSError, ValueError, IndexError):
        return False
    return not zombie and spec.encode() in argv and any(a.endswith(b"ssh") for a in argv[:1])


class SSHServeHost:
    """A server for traces of one SSH host, started there and reached through a local forward."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = {k: info[k] for k in _TARGET_KEYS if info.get(k) is not None}
        python = self.info.get("python", "python3")
        if not isinstance(python, str) or not python or python.startswith("-"):
            raise ServeHostError(f"{python!r} is not a Python to run on the host")
        for key in ("ssh_args", "env_names"):
            value = self.info.get(key, [])
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise ServeHostError(f"{key} = {value!r} is not a list of words")
        try:
            target = target_of(self.info)  # checks host, user and port
        except (KeyError, TypeError, ValueError) as exc:
            raise ServeHostError(f"no SSH host to serve on ({type(exc).__name__}: {exc})") from None
        self.channel = SSHChannel(target, python)
        self.python = python

    # -- identity --------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """Traces with the same key are served by one server (same host, port and ssh options)."""
        t = self.channel.conn.target
        return json.dumps([t.destination, t.port, list(t.ssh_args), self.python])

    def describe(self) -> str:
        return self.channel.describe()

    def to_json(self) -> dict[str, Any]:
        return dict(self.info)

    # -- what to serve ---------------------------------------------------------------------
    def checkpoint(self, run_dir: Path, local: Path | None) -> str:
        """The host's path of a trace's final checkpoint (``local`` is where the mirror keeps it)."""
        remote_dir = read_remote(run_dir).get("remote_dir")
        if not isinstance(remote_dir, str) or not remote_dir.startswith("/"):
            raise ServeHostError(f"{run_dir.name}: its remote.json names no run directory on the host")
        if local is None:
            raise ServeHostError(f"{run_dir.name} has no final checkpoint yet: serve it once it has completed")
        try:
            rel = PurePosixPath(os.path.normpath(local)).relative_to(os.path.normpath(run_dir))
        except ValueError:
            raise ServeHostError(f"{run_dir.name}: its final checkpoint {local} is not in its run directory") from None
        if not rel.parts or ".." in rel.parts:
            raise ServeHostError(f"{run_dir.name}: its final checkpoint {local} is not a folder of the run")
        return str(PurePosixPath(os.path.normpath(remote_dir)) / rel)

    # -- start ------------------------------------------------------------------------------
    def start(
        self,
        spec: dict[str, Any],
        *,
        bind: str,
        port: int,
        api_key_var: str | None,
        log: Path,
        timeout: float,
    ) -> dict[str, Any]:
        """Start the worker on the host and a forward from ``bind:port`` here (0: a free port);
        the registry record (``pid`` is the local forward's)."""
        names = [str(n) for n in self.info.get("env_names") or []]
        if api_key_var and api_key_var not in names:
            names.append(api_key_var)
        exports, _missing = env_exports(names)
        remote_spec = {**spec, "host": "127.0.0.1", "port": 0, "api_key_var": api_key_var, "ready_file": "ready.json"}
        proc = self.channel.shell(start_script(remote_spec, self.python, exports))
        out = proc.stdout.decode(errors="replace")
        if proc.returncode or _MARK not in out:
            err = _printable(proc.stderr.decode(errors="replace"), 1000)
            raise ServeHostError(f"starting the server on {self.describe()} failed: {err or out[-500:]}")
        folder = _folder(out.split(_MARK, 1)[1].splitlines()[0].strip())
        try:
            ready = self._wait_ready(folder, timeout)
            remote_port, remote_pid = _port(ready.get("port")), _pid(ready.get("pid"))
            models = [m for m in ready.get("models") or [] if isinstance(m, str)][:1000]
            fwd_pid, local_port, fwd = self._forward(bind, port, remote_port, log)
        except BaseException:
            self.stop({"dir": folder}, 10.0)
            raise
        return {
            "pid": fwd_pid,
            "host": bind,
            "port": local_port,
            "models": models,
            "started": time.time(),
            "api_key_var": api_key_var,
            "remote": {
                "backend": "ssh",  # the caller adds the trace whose run's own files name this host
                "where": self.describe(),
                "dir": folder,
                "pid": remote_pid,
                "port": remote_port,
                "forward": fwd,
            },
        }

    def _wait_ready(self, folder: str, timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            proc = self.channel.shell(poll_script(folder), timeout=60)
            head, _, rest = proc.stdout.decode(errors="replace").partition("\n")
            if head.strip() == "READY":
                try:
                    doc = json.loads(rest)
                except ValueError:
                    doc = None  # written as we read it: read again
                if isinstance(doc, dict) and "error" in doc:
                    raise ServeHostError(
                        f"the server on {self.describe()} did not start: {_printable(str(doc['error']))}"
                    )
                if isinstance(doc, dict) and "port" in doc:
                    return doc
            elif head.strip() in ("DEAD", "GONE"):
                raise ServeHostError(
                    f"the server on {self.describe()} exited at start; its log ({folder}/server.log):\n"
                    + _printable(rest)
                )
            if time.monotonic() > end:
                raise ServeHostError(f"the server on {self.describe()} did not answer within {timeout:.0f} s")
            time.sleep(0.5)

    def reforward(self, record: dict[str, Any], log: Path) -> dict[str, Any]:
        """A new forward for a record whose forward died (a cut connection, a sleep): the same
        local port when it is free, else another; the record with the new pid, port and spec."""
        remote = dict(record.get("remote") or {})
        bind = str(record.get("host") or ServeStartArgs.host)  # a record without one: the default bind
        port, remote_port = _port(record.get("port")), _port(remote.get("port"))
        try:
            fwd_pid, local_port, fwd = self._forward(bind, port, remote_port, log)
        except ServeHostError:
            fwd_pid, local_port, fwd = self._forward(bind, 0, remote_port, log)
        return {**record, "pid": fwd_pid, "port": local_port, "remote": {**remote, "forward": fwd}}

    def _forward(self, bind: str, port: int, remote_port: int, log: Path) -> tuple[int, int, str]:
        """``ssh -N -L`` in its own session (a kernel restart leaves it); its pid, port, spec."""
        last = ""
        for _ in range(FORWARD_TRIES if not port else 1):
            free = _free_port(bind, port)
            if free is None:
                raise ServeHostError(f"cannot listen on {bind}:{port} here: it is taken, pick another --port")
            local_port = free
            fwd = forward_spec(bind, local_port, remote_port)
            argv = [
                *self.channel.conn.base_args(shared=False),
                "-N",
                "-o",
                "ExitOnForwardFailure=yes",
                "-L",
                fwd,
                "--",
                self.channel.conn.target.destination,
            ]
            with open(log, "ab") as out:
                proc = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            if self._listening(proc, bind, local_port):
                return proc.pid, local_port, fwd
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait(timeout=10)
            last = _printable(log.read_text(errors="replace"), 500) if log.exists() else ""
        why = "the port is taken: pick another --port" if port else "see the log"
        raise ServeHostError(f"forwarding {bind}:{port or local_port} to {self.describe()} failed ({why}): {last}")

    def _listening(self, proc: subprocess.Popen[bytes], bind: str, port: int) -> bool:
        end = time.monotonic() + 30.0
        while time.monotonic() < end:
            if proc.poll() is not None:
                return False
            with contextlib.suppress(OSError), socket.create_connection((bind, port), timeout=1.0):
                time.sleep(0.3)  # ExitOnForwardFailure: a forward that failed exits right away
                return proc.poll() is None
            time.sleep(0.1)
        return False

    # -- stop -------------------------------------------------------------------------------
    def stop(self, remote: dict[str, Any], timeout: float = 30.0) -> None:
        """End the worker on the host and remove its folder (``remote`` is the record's part)."""
        folder = _folder(remote.get("dir"))
        proc = self.channel.shell(stop_script(folder, timeout), timeout=timeout + 30)
        if b"stopped" not in proc.stdout:
            err = _printable(proc.stderr.decode(errors="replace"), 500)
            raise ServeHostError(f"stopping the server on {self.describe()} failed: {err}")


def stop_forward(pid: int, spec: str, timeout: float = 10.0) -> None:
    """End the local ``ssh -N -L`` (only when ``pid`` still is that process)."""
    if not isinstance(spec, str) or not forward_running(pid, spec):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout
    while time.monotonic() < end and forward_running(pid, spec):
        time.sleep(0.1)
    if forward_running(pid, spec):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)  # started by this process: reap it


__all__ = ["SSHError", "SSHServeHost", "ServeHostError", "forward_running", "stop_forward"]
