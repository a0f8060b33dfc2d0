"""The local backend: the engine runs on the kernel's host, in its own process group."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
from pathlib import Path

from primenb.backends.base import Backend, Lineage
from primenb.config import Config
from primenb.config.backend_rules import BackendRules
from primenb.engine.launch import launch_command
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_text
from primenb.protocol.liveness import launch_record
from primenb.protocol.rundir import RunDir, State, atomic_write_json, claim_run_dir, now_iso, record_run
from primenb.protocol.safepath import safe_name, slug
from primenb.run import Run


def default_run_name(config: Config) -> str:
    """As upstream: `<envs>--<model>--<short id>`."""
    envs = "-".join(dict.fromkeys(slug(e, 60) for e in config.environments[:2])) or "run"
    model = slug(config.model_name.split("/")[-1], 60)
    return f"{envs}--{model}--{secrets.token_hex(3)}"


def unused_keys(config: Config) -> list[str]:
    """Settings of the config that the local engine does not honour (`primenb.engine.honoured`)."""
    from primenb.engine.honoured import not_used_locally

    return not_used_locally(config.model)


def num_processes(config: Config) -> int:
    dep = config.model.deployment
    return int(getattr(dep, "num_train_gpus", 1) or 1)


def prepare(config: Config, *, name: str | None = None, lineage: Lineage | None = None, backend: str = "local") -> Path:
    """Create the run directory and write the configs and the queued trace (with ``lineage``);
    refuses to reuse a non-empty directory. Remote backends call it for their local mirror."""
    m = config.model
    # a name is one folder under output_dir, never a path (`--name ../../x`, `--name /abs`)
    run_name = safe_name(name or m.run.name or default_run_name(config))
    run_dir = Path(m.run.dir) if m.run.dir else Path(m.output_dir) / run_name
    # O_EXCL on a marker file: of two launches with the same name exactly one gets the folder
    claim_run_dir(
        run_dir,
        taken=f"run directory {run_dir} already holds a run; pick another --name, or attach to it "
        f"with %prime_train --attach {run_name}",
    )
    files = RunDir(run_dir)
    resolved = config.resolved(primenb=True)
    resolved["run"] = {**resolved.get("run", {}), "name": run_name}
    atomic_write_json(files.resolved_config, resolved)
    atomic_write_text(files.config_toml, config.text)
    atomic_write_json(files.config_file("local.json"), {"not_used_by_local_backend": unused_keys(config)})
    atomic_write_json(
        files.status_path,
        {
            "state": State.QUEUED,
            "name": run_name,
            "backend": backend,
            "mode": config.mode,
            "host": socket.gethostname(),
            "queued_at": now_iso(),
            "max_steps": config.max_steps,
            "not_used_by_local_backend": unused_keys(config),
        },
    )
    from primenb.backends.queued import queued_trace

    queued_trace(run_dir, config, name=run_name, backend=backend, lineage=lineage)
    return run_dir


class LocalBackend(Backend):
    """The engine on the kernel's host, in its own process group; the run directory is live."""

    name = "local"
    saved = True  # `backend add NAME local` saves it too; its spec says nothing more
    config_rules = BackendRules(refuses_local_limits=True)  # `submit` below refuses a `local-limit`

    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        return submit(config, name=name, lineage=lineage)

    def open(self, run_dir: Path) -> Run:
        return Run(run_dir)


def engine_env() -> dict[str, str]:
    """The local engine's environment: this one, unbuffered, and trackio's and MLflow's default
    stores shared by the runs of this PRIME_HOME (`primenb.trackers`: the runs compare there
    out of the box; TRACKIO_DIR / MLFLOW_TRACKING_URI still win)."""
    from primenb.home import prime_home
    from primenb.trackers.sinks import STORE_VAR

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault(STORE_VAR, str(prime_home()))
    return env


def submit(config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
    # what validation warned the local engine cannot train (prime-rl takes it): refused before a run exists
    refused = [d for d in config.report.diagnostics if d.code == "local-limit"]
    if refused:
        raise PrimenbError(
            "the local engine cannot train this config: "
            + "; ".join(f"{d.path}: {d.message} ({d.hint})" for d in refused)
        )
    run_dir = prepare(config, name=name, lineage=lineage)
    files = RunDir(run_dir)
    files.logs.mkdir(exist_ok=True)
    # Several ranks go through `accelerate launch --multi_gpu`, which starts N gloo ranks even on a
    # machine with no GPU (`--cpu --num_processes N` silently starts one).
    cmd = launch_command(run_dir, num_processes(config), launcher="accelerate")
    env = engine_env()
    with open(files.launcher_log, "ab") as log:
        try:
            process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env
            )
        except OSError as exc:
            raise PrimenbError(f"could not start the engine ({' '.join(cmd)}): {exc}") from exc
    # A file of its own: status.json belongs to the engine from the moment it starts.
    atomic_write_json(
        files.launcher_path,
        {**launch_record(process.pid), "command": cmd, "python": sys.executable},
    )
    record_run(run_dir)
    return Run(run_dir, process=process)
