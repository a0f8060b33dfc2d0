"""One SSH host as a remote backend's channel: the primenb agent run with the host's Python, files
streamed back with tar, shell scripts sent on stdin; and the host of a saved run (``target_of``)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from primenb.backends.specdoc import check_env_name
from primenb.backends.sshconn import SSHConnection, SSHError, SSHTarget, quote

AGENT_SOURCE = (Path(__file__).with_name("agent.py")).read_bytes()


class SSHChannel:
    """`Channel` over one multiplexed ssh connection, running the agent with the host's Python."""

    def __init__(self, target: SSHTarget, python: str = "python3") -> None:
        self.conn = SSHConnection.to(target)
        self.python = python

    def describe(self) -> str:
        t = self.conn.target
        return t.destination + (f":{t.port}" if t.port else "")

    def agent(self, *args: str) -> dict[str, Any]:
        proc = self.conn.run(f"{quote(self.python)} - {quote(*args)}", input=AGENT_SOURCE, timeout=60)
        err = proc.stderr.decode(errors="replace").strip()
        if proc.returncode == 127 or (proc.returncode and "not found" in err.lower() and not proc.stdout):
            raise MissingPython(
                f"{self.describe()} has no Python at {self.python!r} ({err.splitlines()[-1] if err else 'exit 127'}): "
                "set the backend's python option to the interpreter of the environment that has primenb, e.g. "
                "%prime_backend add NAME URL python=/opt/venv/bin/python"
            )
        if proc.returncode:
            raise SSHError(f"{self.describe()}: the primenb agent failed (exit {proc.returncode}): {err[-2000:]}")
        lines = proc.stdout.decode(errors="replace").strip().splitlines()
        try:
            return dict(json.loads(lines[-1]))
        except (IndexError, ValueError):
            raise SSHError(f"{self.describe()}: unreadable answer from the primenb agent: {lines[-3:]}") from None

    def fetch(self, remote_dir: str, paths: list[str], local_dir: Path) -> None:
        script = (
            f"cd {quote(remote_dir)} && set -- && for p in {quote(*paths)}; do "
            '[ -e "$p" ] && set -- "$@" "$p"; done; [ $# -eq 0 ] || exec tar -cf - "$@"'
        )
        argv = [*self.conn.base_args(), self.conn.target.destination, script]
        with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            try:
                with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                    for member in tar:
                        try:
                            tar.extract(member, local_dir, filter="data")
                        except tarfile.FilterError:
                            # a link out of the run directory (W&B's offline run links its core
                            # log into W&B's cache): left behind, the rest still comes back
                            continue
            except tarfile.ReadError:
                pass  # nothing to fetch (an empty stream)
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.wait(timeout=600) == 255:
                raise SSHError(f"fetching {paths} from {self.describe()} failed: {err.strip()[-500:]}")

    def put_tar(self, remote_dir: str, data: bytes) -> None:
        proc = self.conn.run(f"mkdir -p {quote(remote_dir)} && tar -xf - -C {quote(remote_dir)}", input=data)
        if proc.returncode:
            raise SSHError(f"copying the run to {self.describe()}:{remote_dir} failed: {proc.stderr.decode()[-500:]}")

    def shell(self, script: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        """Run a POSIX shell script sent on stdin (so values in it never appear in a process list)."""
        return self.conn.run("sh -s", input=script.encode(), timeout=timeout)


class MissingPython(SSHError):
    pass


def target_of(info: dict[str, Any]) -> SSHTarget:
    return SSHTarget(
        host=str(info["host"]),
        user=info.get("user"),
        port=info.get("port"),
        ssh_args=tuple(info.get("ssh_args") or ()),
        connect_timeout=int(info.get("connect_timeout") or 10),
    )


def env_exports(names: list[str]) -> tuple[str, list[str]]:
    """``export`` lines for the forwarded variables (each name's value here, read now, quoted for
    the shell) and the names that are not set here. Names were checked when the backend was made;
    an old saved backend with ``NAME=VALUE`` is refused here, not sent."""
    lines, missing = [], []
    for name in names:
        check_env_name(name)
        if name not in os.environ:
            missing.append(name)
            continue
        lines.append(f"export {name}={quote(os.environ[name])}")
    return "\n".join(lines), missing


__all__ = ["AGENT_SOURCE", "MissingPython", "SSHChannel", "env_exports", "target_of"]
