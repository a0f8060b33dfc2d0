"""One multiplexed OpenSSH connection per host: the system ``ssh`` client, so ``~/.ssh/config``,
agents, keys and jump hosts behave as in a terminal. Every call is non-interactive
(``BatchMode=yes``) and bounded (``ConnectTimeout`` + a subprocess timeout), so a dead host is an
error after seconds, never a hang."""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

from primenb.errors import PrimenbError


class SSHError(PrimenbError):
    """The host could not be reached, refused us, or the remote command failed."""


_CONTROL_DIR: str | None = None


def _control_dir() -> str:
    # A short private folder: ControlPath must fit in a unix socket path (~104 bytes).
    global _CONTROL_DIR
    if _CONTROL_DIR is None:
        _CONTROL_DIR = tempfile.mkdtemp(prefix="pnb-ssh-", dir="/tmp" if os.path.isdir("/tmp") else None)
        os.chmod(_CONTROL_DIR, 0o700)
        atexit.register(_close_all)
    return _CONTROL_DIR


_OPEN: dict[tuple[str, ...], SSHConnection] = {}


def _close_all() -> None:
    for conn in list(_OPEN.values()):
        conn.close()
    if _CONTROL_DIR:
        shutil.rmtree(_CONTROL_DIR, ignore_errors=True)


def check_destination(host: object, user: object = None) -> None:
    """A host and user that ssh can only read as a destination: not empty, no leading '-' (which
    ssh would take as an option: ``ssh://-oProxyCommand=...@host`` runs a command), no space,
    control character or '@' in the host. Checked where a URL is parsed and again where a saved
    run's remote.json is read, so a hostile file cannot reach ssh's argv either."""
    for what, value in (("host", host), ("user", user)):
        if value is None and what == "user":
            continue
        text = value if isinstance(value, str) else ""
        bad = (
            not text
            or text.startswith("-")
            or any(c.isspace() or not c.isprintable() for c in text)
            or (what == "host" and "@" in text)
        )
        if bad:
            raise SSHError(
                f"{value!r} cannot be an ssh {what}: it must be a plain name that does not start with '-' "
                "(write the URL as ssh://user@host[:port][/workdir]; ssh options go in ssh_args=...)"
            )


@dataclass(frozen=True)
class SSHTarget:
    host: str
    user: str | None = None
    port: int | None = None
    ssh_args: tuple[str, ...] = ()
    connect_timeout: int = 10

    def __post_init__(self) -> None:
        check_destination(self.host, self.user)
        if self.port is not None and not (isinstance(self.port, int) and 0 < self.port < 65536):
            raise SSHError(f"{self.port!r} is not a port number (1-65535)")

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


class SSHConnection:
    """Commands on one host over one ControlMaster connection (re-opened on demand after a cut)."""

    def __init__(self, target: SSHTarget) -> None:
        import hashlib

        self.target = target
        self._tag = hashlib.sha1(repr(target).encode()).hexdigest()[:8]

    @classmethod
    def to(cls, target: SSHTarget) -> SSHConnection:
        key = (target.destination, str(target.port), *target.ssh_args)
        if key not in _OPEN:
            _OPEN[key] = cls(target)
        return _OPEN[key]

    def base_args(self, *, shared: bool = True) -> list[str]:
        """ssh's arguments for this target; ``shared=False``: a connection of its own, not the
        control master (a process that must outlive this kernel, whose master closes with it)."""
        t = self.target
        control = (
            [
                "-o",
                "ControlMaster=auto",
                "-o",
                # Per ssh_args too: a master opened with one key must not serve a target with another.
                f"ControlPath={_control_dir()}/{self._tag}-%C",
                "-o",
                "ControlPersist=60",
            ]
            if shared
            else ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        )
        args = [
            "ssh",
            "-o",
            "BatchMode=yes",
            "-o",
            f"ConnectTimeout={t.connect_timeout}",
            *control,
            # A cut link is noticed in ~10 s instead of a TCP timeout of minutes.
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=2",
        ]
        if t.port:
            args += ["-p", str(t.port)]
        return [*args, *(os.path.expanduser(a) for a in t.ssh_args)]

    def run(
        self, command: str, *, input: bytes | None = None, timeout: float = 60.0, check: bool = True
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``command`` (a remote shell command line) on the host."""
        argv = [*self.base_args(), "--", self.target.destination, command]
        try:
            proc = subprocess.run(
                argv,
                input=input if input is not None else b"",
                capture_output=True,
                timeout=timeout,
                start_new_session=True,  # a Ctrl-C in the notebook must not kill the shared master
            )
        except subprocess.TimeoutExpired:
            raise SSHError(f"ssh {self.target.destination}: no answer within {timeout:.0f}s") from None
        except FileNotFoundError:
            raise SSHError("no ssh client on this machine: install OpenSSH (apt-get install openssh-client)") from None
        if check and proc.returncode == 255:
            raise SSHError(describe_failure(self.target, proc.stderr.decode(errors="replace")))
        return proc

    def master_pid(self) -> int | None:
        """The control master's pid (tests cut the connection by killing it)."""
        argv = [*self.base_args(), "-O", "check", "--", self.target.destination]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        text = proc.stderr + proc.stdout
        if "pid=" in text:
            return int(text.split("pid=")[1].split(")")[0])
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            argv = [*self.base_args(), "-O", "exit", "--", self.target.destination]
            subprocess.run(argv, capture_output=True, timeout=10)


def describe_failure(target: SSHTarget, stderr: str) -> str:
    """ssh's exit 255 in words, with what to do."""
    where = target.destination + (f":{target.port}" if target.port else "")
    err = stderr.strip().splitlines()[-1] if stderr.strip() else "no message"
    low = stderr.lower()
    if "permission denied" in low:
        hint = (
            "the host refused our key: add your public key to the host's ~/.ssh/authorized_keys or load it "
            "into ssh-agent (primenb never asks for a password: BatchMode=yes)"
        )
    elif "host key verification failed" in low:
        hint = f"the host key is unknown or changed: connect once with `ssh {where}` in a terminal"
    elif "could not resolve" in low:
        hint = "the host name does not resolve: check the URL or your ~/.ssh/config"
    elif "connection refused" in low or "timed out" in low or "no route" in low or "unreachable" in low:
        hint = "the host is unreachable: check that it is up and that sshd listens on that port"
    else:
        hint = "check the host with `ssh " + where + "` in a terminal"
    return f"ssh {where}: {err} ({hint})"


def quote(*words: str) -> str:
    return " ".join(shlex.quote(w) for w in words)


__all__ = ["SSHConnection", "SSHError", "SSHTarget", "check_destination", "describe_failure", "quote"]
