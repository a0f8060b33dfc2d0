"""The SLURM backend: ``sbatch`` a script written from ``[slurm]``/``[deployment]``, follow the job.

``slurm://`` submits to the cluster this machine belongs to; the run directory is on the shared
filesystem, so it is read in place. ``slurm://login-host[/workdir]`` submits over SSH and follows
the run directory through the same mirror as the SSH backend. The job's state (``squeue``, then
``scontrol show job``, then ``sacct``) is mapped onto primenb's: PENDING is ``queued`` with
SLURM's reason; a job that ends without the engine's final status ends ``failed`` (or ``stopped``
when cancelled) with the log tail. We write the script ourselves rather than use submitit: the
script must be a plain file a user can read and ``sbatch`` by hand, and submitit pickles Python
callables and needs itself installed on the cluster.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from primenb.backends.base import Backend, Lineage
from primenb.backends.remote import RemoteMirror, read_remote, write_remote
from primenb.backends.slurm_script import batch_script
from primenb.backends.specdoc import BackendSpec
from primenb.config import Config
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json, atomic_write_text
from primenb.protocol.rundir import FAILED, FINAL_STATES, QUEUED, STOPPED, RunDir, now_iso, record_run
from primenb.run import Run

LIVE_JOB = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING")
SCRIPT = RunDir.SLURM_SCRIPT

Runner = Callable[[list[str]], "subprocess.CompletedProcess[bytes]"]


class SlurmError(PrimenbError):
    pass


def local_runner(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    if shutil.which(argv[0]) is None:
        raise SlurmError(f"{argv[0]} is not on PATH: run primenb on a SLURM login node, or use slurm://login-host")
    try:
        return subprocess.run(argv, capture_output=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} gave no answer within 30 s (is slurmctld up?)") from None


def job_state(run: Runner, job_id: str) -> tuple[str | None, str | None]:
    """(STATE, reason) of a job, or (None, None) when SLURM no longer knows it."""
    proc = run(["squeue", "-h", "-j", job_id, "-o", "%T|%r"])
    out = proc.stdout.decode(errors="replace").strip()
    if proc.returncode == 0 and out:
        state, _, reason = out.splitlines()[0].partition("|")
        return state.strip(), reason.strip() or None
    proc = run(["scontrol", "show", "job", "-o", job_id])
    text = proc.stdout.decode(errors="replace")
    m = re.search(r"JobState=(\S+)", text)
    if proc.returncode == 0 and m:
        why = re.search(r"Reason=(\S+)", text)
        return m.group(1), why.group(1) if why else None
    proc = run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,Reason"])
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode == 0 and lines and "|" in lines[0]:
        state, _, reason = lines[0].partition("|")
        return state.split()[0], reason or None
    return None, None


class SlurmJob:
    """Follows one job and turns its end into a final status when the engine could not."""

    def __init__(self, run_dir: Path, job_id: str, run: Runner, *, min_interval: float = 2.0) -> None:
        self.files = RunDir(run_dir)
        self.job_id = job_id
        self.run = run
        self.min_interval = min_interval
        self.state: str | None = None
        self.reason: str | None = None
        self._last = 0.0

    def poll(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        status = self.files.read_status()
        if status.get("state") in FINAL_STATES:
            return
        try:
            self.state, self.reason = job_state(self.run, self.job_id)
        except PrimenbError:
            self.state = None
            return
        status = self.files.read_status()  # the engine may have written meanwhile
        slurm = {"job_id": self.job_id, "state": self.state, "reason": self.reason, "checked_at": now_iso()}
        if self.state in ("PENDING", "CONFIGURING") and status.get("state") == QUEUED:
            atomic_write_json(self.files.status_path, {**status, "slurm": slurm})
        elif self.state is not None and self.state not in LIVE_JOB and status.get("state") not in FINAL_STATES:
            self._ended(status, slurm)

    def _ended(self, status: dict[str, Any], slurm: dict[str, Any]) -> None:
        cancelled = str(self.state).startswith("CANCELLED")
        tail = self.files.log_tail(20)
        why = f"SLURM job {self.job_id} ended {self.state}" + (f" ({self.reason})" if self.reason else "")
        if not cancelled:
            why += " before the engine wrote a final status; see the log tail"
        atomic_write_json(
            self.files.status_path,
            {
                **status,
                "state": STOPPED if cancelled else FAILED,
                "ended_at": now_iso(),
                "error": None if cancelled else why,
                "stop_requested": why if cancelled else status.get("stop_requested"),
                "log_tail": tail,
                "slurm": slurm,
            },
        )

    def alive(self) -> bool | None:
        if self.state is None:
            return None
        return self.state in LIVE_JOB

    def cancel(self) -> None:
        self.run(["scancel", self.job_id])


class SlurmControl:
    """`RunControl` of a job on the cluster this machine belongs to (shared filesystem)."""

    def __init__(self, job: SlurmJob) -> None:
        self.job = job

    def sync(self) -> None:
        self.job.poll()

    def alive(self) -> bool | None:
        return self.job.alive()

    def request_stop(self, *, force: bool) -> None:
        self.job.poll(force=True)
        if force or self.job.state in ("PENDING", "CONFIGURING", None):
            self.job.cancel()  # SIGTERM to the steps: the engine checkpoints if it can
        else:
            self.job.files.stop_path.touch()
        self.job.poll(force=True)


class RemoteSlurmControl(RemoteMirror):
    """A job submitted over SSH: the mirror follows the files, squeue (over SSH) the job."""

    def __init__(self, local_dir: Path, channel: Any, remote_dir: str, job: SlurmJob) -> None:
        super().__init__(local_dir, channel, remote_dir, stopper=self._stop)
        self.job = job

    def sync(self, *, force: bool = False) -> None:
        super().sync(force=force)
        self.job.poll(force=force)

    def alive(self) -> bool | None:
        return self.job.alive()

    def _stop(self, force: bool) -> None:
        if force or self.job.state in ("PENDING", "CONFIGURING", None):
            self.job.cancel()
        else:
            self.channel.agent("stop", self.remote_dir, "0")


class SlurmBackend(Backend):
    name = "slurm"
    saved = url_scheme = True  # slurm:// (sbatch here) or slurm://login-host[/workdir]
    spec: BackendSpec  # never None here: a bare kind resolves to an empty spec of its own

    def __init__(self, spec: BackendSpec | None = None) -> None:
        self.spec = spec or BackendSpec("slurm")

    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        from primenb.backends.local import prepare

        spec = self.spec
        run_dir = prepare(config, name=name, lineage=lineage, backend="slurm").resolve()
        record_run(run_dir)
        RunDir(run_dir).logs.mkdir(exist_ok=True)
        info: dict[str, Any] = {"backend": "slurm", "url": spec.url, "name": spec.name, "host": spec.host}
        python = spec.python or "python3"
        try:
            if spec.host:
                return self._submit_over_ssh(config, run_dir, info, python)
            # the job inherits this process's environment (sbatch's --export=ALL), env= names included
            script = batch_script(config, str(run_dir), python=python, request_gpus=spec.request_gpus)
            atomic_write_text(RunDir(run_dir).path(SCRIPT), script)
            job_id = _sbatch(local_runner, [*spec.sbatch_args, str(RunDir(run_dir).path(SCRIPT))], cwd=None)
        except PrimenbError as exc:
            _failed(run_dir, str(exc))
            return Run(run_dir)
        write_remote(run_dir, {**info, "job_id": job_id, "script": str(RunDir(run_dir).path(SCRIPT))})
        return Run(run_dir, control=SlurmControl(SlurmJob(run_dir, job_id, local_runner)))

    def _submit_over_ssh(self, config: Config, run_dir: Path, info: dict[str, Any], python: str) -> Run:
        from primenb.backends.ssh import SSHChannel, env_exports, pack, probe, remote_workdir, target_of

        spec = self.spec
        info.update(
            user=spec.user,
            port=spec.port,
            ssh_args=list(spec.ssh_args),
            connect_timeout=spec.connect_timeout,
            python=python,
        )
        channel = SSHChannel(target_of(info), python)
        found = probe(channel)
        remote_dir = f"{remote_workdir(spec.workdir, str(found['home']))}/{run_dir.name}"
        script = batch_script(config, remote_dir, python=python, request_gpus=spec.request_gpus)
        atomic_write_text(RunDir(run_dir).path(SCRIPT), script)
        info["remote_dir"] = remote_dir
        write_remote(run_dir, info)
        channel.put_tar(remote_dir, pack(run_dir))
        runner = _ssh_runner(channel)
        exports, missing = env_exports(spec.env)
        if missing:
            info["env_missing"] = missing
        job_id = _sbatch(_stdin_runner(channel, exports), [*spec.sbatch_args, f"{remote_dir}/{SCRIPT}"], cwd=remote_dir)
        write_remote(run_dir, {**info, "job_id": job_id, "script": f"{remote_dir}/{SCRIPT}"})
        job = SlurmJob(run_dir, job_id, runner)
        return Run(run_dir, control=RemoteSlurmControl(run_dir, channel, remote_dir, job))

    def open(self, run_dir: Path) -> Run:
        info = read_remote(run_dir)
        job_id = info.get("job_id")
        if not job_id:
            return Run(run_dir)
        if info.get("host") and info.get("remote_dir"):
            from primenb.backends.ssh import SSHChannel, target_of

            channel = SSHChannel(target_of(info), str(info.get("python") or "python3"))
            job = SlurmJob(Path(run_dir), str(job_id), _ssh_runner(channel))
            return Run(run_dir, control=RemoteSlurmControl(Path(run_dir), channel, str(info["remote_dir"]), job))
        return Run(run_dir, control=SlurmControl(SlurmJob(Path(run_dir), str(job_id), local_runner)))


def _ssh_runner(channel: Any) -> Runner:
    from primenb.backends.sshconn import quote

    def run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        return channel.conn.run(quote(*argv), timeout=30)  # type: ignore[no-any-return]

    return run


def _stdin_runner(channel: Any, exports: str) -> Runner:
    """sbatch over SSH with the env= values in its environment: they travel on the channel's stdin
    and are exported by the remote shell before sbatch starts (its --export=ALL hands them to the
    job), so no value is written into the script or onto a command line."""
    from primenb.backends.sshconn import quote

    def run(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        line = quote("sh", "-c", 'eval "$(cat)" && exec "$@"', "sh", *argv)
        return channel.conn.run(line, input=exports.encode(), timeout=30)  # type: ignore[no-any-return]

    return run


def _sbatch(run: Runner, args: list[str], cwd: str | None) -> str:
    argv = ["sbatch", "--parsable", *args]
    if cwd:
        argv = ["sh", "-c", 'cd "$1" && shift && exec "$@"', "sh", cwd, *argv]
    proc = run(argv)
    out = proc.stdout.decode(errors="replace").strip()
    if proc.returncode or not out:
        err = proc.stderr.decode(errors="replace").strip()
        raise SlurmError(f"sbatch rejected the job: {err or out or f'exit {proc.returncode}'}")
    return out.splitlines()[-1].split(";")[0].strip()


def _failed(run_dir: Path, why: str) -> None:
    files = RunDir(run_dir)
    atomic_write_json(files.status_path, {**files.read_status(), "state": FAILED, "ended_at": now_iso(), "error": why})


__all__ = ["SlurmBackend", "SlurmControl", "SlurmJob", "job_state"]
