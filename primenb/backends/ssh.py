"""The SSH backend: the engine runs detached on a host; a local mirror follows its run directory.

Submit: prepare the run directory here (configs, queued trace), check the host's Python and
primenb (``probe``), copy the directory (and a local environment folder the run uses) with tar
over the control connection, start ``python -m primenb.engine`` under ``setsid nohup`` so it
survives a cut connection and a closed notebook, and hand `Run` a `RemoteMirror`.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from primenb.backends.base import Backend, Capabilities, Lineage
from primenb.backends.remote import RemoteMirror, read_remote, write_remote
from primenb.backends.specdoc import BackendSpec, BackendSpecError
from primenb.backends.sshchannel import MissingPython, SSHChannel, env_exports, target_of
from primenb.backends.sshconn import SSHError, quote
from primenb.config import Config
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json
from primenb.protocol.rundir import FAILED, RunDir, now_iso, record_run
from primenb.run import Run

DEFAULT_WORKDIR = "primenb-runs"  # under the remote home


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
    saved = url_scheme = True  # ssh://[user@]host[:port][/workdir]
    spec: BackendSpec  # never None here: a bare kind resolves to an empty spec of its own
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


def _failed(run_dir: Path, why: str) -> None:
    files = RunDir(run_dir)
    atomic_write_json(files.status_path, {**files.read_status(), "state": FAILED, "ended_at": now_iso(), "error": why})


__all__ = ["MissingPython", "SSHBackend", "SSHChannel", "env_exports", "target_of"]
