"""The SSH backend: the engine runs detached on a host; a local mirror follows its run directory.

Submit: prepare the run directory here (configs, queued trace), check the host's Python and
primenb (``probe``), copy the directory (and a local environment folder the run uses) with tar
over the control connection, start ``python -m primenb.engine`` under ``setsid nohup`` so it
survives a cut connection and a closed notebook, and hand `Run` a `RemoteMirror`.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from primenb.backends.base import Backend, Capabilities, Lineage
from primenb.backends.remote import RemoteMirror, read_remote, write_remote
from primenb.backends.spec import BackendSpec, BackendSpecError
from primenb.backends.sshconn import SSHConnection, SSHError, SSHTarget, quote
from primenb.config import Config
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json
from primenb.protocol.rundir import FAILED, RunDir, now_iso, record_run
from primenb.run import Run

AGENT_SOURCE = (Path(__file__).with_name("agent.py")).read_bytes()
DEFAULT_WORKDIR = "primenb-runs"  # under the remote home


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
                    tar.extractall(local_dir, filter="data")
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
    from primenb.backends.spec import check_env_name

    lines, missing = [], []
    for name in names:
        check_env_name(name)
        if name not in os.environ:
            missing.append(name)
            continue
        lines.append(f"export {name}={quote(os.environ[name])}")
    return "\n".join(lines), missing


def probe(channel: SSHChannel) -> dict[str, Any]:
    """The host's Python and primenb; raises with the exact install command when primenb is missing."""
    info = channel.agent("probe")
    if not info.get("primenb"):
        from importlib.metadata import PackageNotFoundError, version

        try:
            __version__ = version("primenb")
        except PackageNotFoundError:
            __version__ = "VERSION"
        raise PrimenbError(
            f"primenb is not installed for {info.get('python')} on {channel.describe()}. Install it there: "
            f"ssh {channel.describe()} {quote(str(info.get('python') or channel.python))} -m pip install "
            f"'primenb=={__version__}'  (or point the backend at a Python that has it: python=/path/to/venv/bin/python)"
        )
    return info


def remote_workdir(spec_workdir: str | None, home: str) -> str:
    wd = spec_workdir or DEFAULT_WORKDIR
    if wd.startswith("~"):
        wd = home + wd[1:]
    return wd if wd.startswith("/") else f"{home.rstrip('/')}/{wd}"


def pack(run_dir: Path, extra: dict[str, Path] | None = None) -> bytes:
    """The run directory (and ``extra`` folders under their archive names) as a tar archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for child in sorted(run_dir.iterdir()):
            tar.add(child, arcname=child.name)
        for arcname, path in (extra or {}).items():
            tar.add(path, arcname=arcname, filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return buf.getvalue()


def local_env_folders(config: Config) -> dict[str, Path]:
    """Registered local-folder environments the run uses: id -> folder or .py file."""
    from primenb.envs import store

    out = {}
    for env_id in dict.fromkeys(config.environments):
        entry = store.load(env_id) if store.ID_RE.match(env_id) else None
        if entry is not None and entry.kind == "path" and Path(entry.target).exists():
            out[env_id] = Path(entry.target)
    return out


def launch_script(remote_dir: str, argv: list[str], exports: str, env_home: bool) -> str:
    home = f"export PRIME_HOME={quote(remote_dir + '/home')}\n" if env_home else ""
    return f"""set -e
cd {quote(remote_dir)}
{exports}
{home}export PYTHONUNBUFFERED=1 HF_HUB_DISABLE_PROGRESS_BARS=1
mkdir -p logs
rm -f STOP launcher.pid
if command -v setsid >/dev/null 2>&1; then S=setsid; else S=; fi
# Own session, no terminal, output to a file: the engine outlives this connection.
$S nohup sh -c 'echo $$ > launcher.pid; exec "$@"' primenb-engine {quote(*argv)} > logs/launcher.log 2>&1 < /dev/null &
echo started
"""


class SSHBackend(Backend):
    name = "ssh"
    capabilities = Capabilities(serves_on_host=True)

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("ssh")

    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        from primenb.backends.local import num_processes, prepare
        from primenb.engine.launch import launch_command

        spec = self.spec
        if not spec.host:
            raise BackendSpecError("the ssh backend needs a host: --backend ssh://[user@]host[:port][/workdir]")
        run_dir = prepare(config, name=name, lineage=lineage, backend="ssh").resolve()
        record_run(run_dir)
        info: dict[str, Any] = {
            "backend": "ssh",
            "url": spec.url,
            "name": spec.name,
            "host": spec.host,
            "user": spec.user,
            "port": spec.port,
            "ssh_args": list(spec.ssh_args),
            "connect_timeout": spec.connect_timeout,
            "python": spec.python or "python3",
            "env_names": list(spec.env),  # names only: values stay here
        }
        write_remote(run_dir, info)
        channel = SSHChannel(target_of(info), info["python"])
        try:
            found = probe(channel)
            remote_dir = f"{remote_workdir(spec.workdir, str(found['home']))}/{run_dir.name}"
            info.update(remote_dir=remote_dir, remote_python=found["python"], remote_primenb=found["primenb"])
            write_remote(run_dir, info)
            envs = local_env_folders(config)
            extra = {f"envs/{k}": v for k, v in envs.items()}
            taken = channel.conn.run(f"test -e {quote(remote_dir)}", check=True)
            if taken.returncode == 0:
                raise PrimenbError(
                    f"{channel.describe()}:{remote_dir} already exists; pick another --name for this run"
                )
            channel.put_tar(remote_dir, pack(run_dir, extra))
            if envs:
                self._register_envs(channel, remote_dir, envs)
            exports, missing = env_exports(spec.env)
            if missing:
                info["env_missing"] = missing
                write_remote(run_dir, info)
            argv = launch_command(remote_dir, num_processes(config), launcher="accelerate", python=info["python"])
            proc = channel.shell(launch_script(remote_dir, argv, exports, env_home=bool(envs)))
            if proc.returncode or b"started" not in proc.stdout:
                raise SSHError(f"starting the engine on {channel.describe()} failed: {proc.stderr.decode()[-1000:]}")
        except PrimenbError as exc:
            _failed(run_dir, str(exc))
            return Run(run_dir)
        return Run(run_dir, control=RemoteMirror(run_dir, channel, remote_dir))

    def _register_envs(self, channel: SSHChannel, remote_dir: str, envs: dict[str, Path]) -> None:
        """Register the copied environment folders in a run-private PRIME_HOME on the host."""
        from primenb.envs import store

        lines = ["set -e"]
        for env_id in envs:
            entry = store.load(env_id)
            assert entry is not None
            target = f"{remote_dir}/envs/{env_id}"
            data = {**entry.to_json(), "target": target}
            dest = f"{remote_dir}/home/environments/{env_id}.json"
            lines.append(f"mkdir -p {quote(remote_dir + '/home/environments')}")
            lines.append(f"printf '%s\\n' {quote(json.dumps(data))} > {quote(dest)}")
        proc = channel.shell("\n".join(lines))
        if proc.returncode:
            raise SSHError(f"registering environments on {channel.describe()} failed: {proc.stderr.decode()[-500:]}")

    def open(self, run_dir: Path) -> Run:
        info = read_remote(run_dir)
        if not info.get("host") or not info.get("remote_dir"):
            return Run(run_dir)  # it never reached the host: its status says why
        channel = SSHChannel(target_of(info), str(info.get("python") or "python3"))
        return Run(run_dir, control=RemoteMirror(Path(run_dir), channel, str(info["remote_dir"])))

    def fetch_artifacts(self, run: Run) -> Path:
        control = run._control
        if isinstance(control, RemoteMirror):
            return control.fetch_artifacts()
        return run.dir

    def serve_host(self, run_dir: Path) -> Any:
        """The host a run trained on, to serve its checkpoint there (`primenb.backends.ssh_serve`)."""
        from primenb.backends.ssh_serve import SSHServeHost

        info = read_remote(run_dir)
        if not info.get("host") or not info.get("remote_dir"):
            raise PrimenbError(f"{Path(run_dir).name} never reached its SSH host: there is nothing to serve there")
        return SSHServeHost(info)

    def serve_host_from(self, record: dict[str, Any]) -> Any:
        from primenb.backends.ssh_serve import SSHServeHost

        return SSHServeHost(dict(record.get("ssh") or {}))


def _failed(run_dir: Path, why: str) -> None:
    files = RunDir(run_dir)
    atomic_write_json(files.status_path, {**files.read_status(), "state": FAILED, "ended_at": now_iso(), "error": why})


__all__ = ["SSHBackend", "SSHChannel"]
