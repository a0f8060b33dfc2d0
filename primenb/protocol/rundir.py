"""The run directory protocol: the files the engine writes and every viewer reads.

``RUN_DIR/``
    ``configs/resolved.json``  the config the engine trains (written by the launcher)
    ``status.json``            state + progress, replaced atomically (tmp file + ``os.replace``)
    ``metrics.jsonl``          one JSON object per logging step: ``{"step", "time", ...}``
    ``samples.jsonl``          sampled rollouts: ``{"step", "prompt", "completion", "reward", ...}``
    ``logs/engine.log``        the engine's log
    ``checkpoints/step_N/``    ``save_pretrained`` output (adapter only for LoRA)
    ``STOP``                   created by anyone to ask the engine to stop at the next step

``status.json["state"]`` is a `State` (`primenb.protocol.documents`): queued (launcher), running,
completed, failed, stopped; ``phase`` (one of `PHASES`) says what a running engine does, with ``phase_step`` of
``phase_total`` counted within the phase. Each metrics row carries ``"phase"``: ``"sft warmup"``
(the SFT warm-up of an RL run, keys still under ``warmup/``), ``"rl"`` or ``"sft"``; runs written
before these fields existed have none of them and viewers fall back to ``step``/``max_steps`` and
the ``warmup/`` key prefix. No torch import here, so viewers can use it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from primenb.fsutil import atomic_write_json
from primenb.protocol import reader
from primenb.protocol import stage as _stage
from primenb.protocol.documents import (
    FINAL_STATES,
    LIVE_STATES,
    STATES,
    STATUS_VERSION,
    State,
    StatusDoc,
    read_status,
    read_status_doc,
)
from primenb.protocol.reader import tail_lines

RUN_INDEX = "runs.txt"  # in the primenb home: one run directory per line, appended at launch
QUEUED, RUNNING, COMPLETED, FAILED, STOPPED = State.QUEUED, State.RUNNING, State.COMPLETED, State.FAILED, State.STOPPED
# what a running engine does, in order (status.json "phase")
STARTING, IMPORTING, BUILDING_MODEL, BUILDING_TRAINER = "starting", "importing", "building model", "building trainer"
SFT_WARMUP, TRAINING, SAVING, DONE = "sft warmup", "training", "saving", "done"
PHASES = (STARTING, IMPORTING, BUILDING_MODEL, SFT_WARMUP, BUILDING_TRAINER, TRAINING, SAVING, DONE)
_STEP_DIR = re.compile(r"^step_(\d+)$")


def checkpoint_step(name: str) -> int | None:
    """N of a ``step_N`` checkpoint folder's name; None for any other name."""
    m = _STEP_DIR.match(name)
    return int(m.group(1)) if m else None


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime())


def finite_numbers(values: Mapping[str, Any]) -> dict[str, float | int]:
    """Keep numeric, finite values (bools become ints); drop everything else."""
    out: dict[str, float | int] = {}
    for key, value in values.items():
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            try:
                value = value.item()
            except Exception:
                continue
        if isinstance(value, bool):
            out[key] = int(value)
        elif isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
            out[key] = value
    return out


class JsonlWriter:
    """Append-only JSON lines, flushed after every row so a tailing reader sees it at once."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh: TextIO | None = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def write(self, row: Mapping[str, Any]) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps(row, default=str, allow_nan=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file read safely (`primenb.protocol.reader`); a partial last line (a writer
    mid-append) is skipped."""
    return reader.read_jsonl(path)


def metric_row(row: Any) -> dict[str, Any] | None:
    """A metrics.jsonl row as viewers may trust it: an object with an integer ``step``, finite
    numbers and the ``phase`` string (other strings, lists and NaN in a hand-edited or foreign
    file are dropped); else None."""
    if not isinstance(row, dict):
        return None
    step = row.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    out: dict[str, Any] = finite_numbers(row)
    out["step"] = step
    if isinstance(row.get("phase"), str):
        out["phase"] = row["phase"][:40]
    return out


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl that `metric_row` accepts."""
    return [r for r in map(metric_row, read_jsonl(path)) if r is not None]


class RunDir:
    """Every path inside one run directory, and its typed readers. Nothing else joins the names
    of a run directory's files."""

    # the names, relative to the run directory (remote backends list them for syncing)
    STATUS = "status.json"
    TRACE = "trace.json"
    METRICS = "metrics.jsonl"
    SAMPLES = "samples.jsonl"
    TRACKERS = "trackers"  # the trackers' local files (W&B offline runs, event files, stores)
    LAUNCHER = "launcher.json"
    REMOTE_LAUNCHER = "remote_launcher.json"
    REMOTE = "remote.json"  # a remote backend's mirror: how to reach the remote run again
    SLURM_SCRIPT = "slurm.sh"
    HOSTED_CHECKPOINTS = "hosted_checkpoints.json"
    STOP = "STOP"
    CONFIGS = "configs"
    LOGS = "logs"
    CHECKPOINTS = "checkpoints"
    WARMUP_CHECKPOINT = _stage.SFT_WARMUP  # checkpoints/sft_warmup: the full model an RL run's SFT warm-up made
    EVALS = "evals"  # evals/<env slug>.json: the latest `%prime_eval` of that environment
    ENGINE_LOG = f"{LOGS}/engine.log"
    LAUNCHER_LOG = f"{LOGS}/launcher.log"
    # what a bundle (`primenb.traces.transfer`) carries of a run directory
    BUNDLED = (TRACE, STATUS, METRICS, SAMPLES, CONFIGS)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    # paths
    @property
    def configs(self) -> Path:
        return self.root / self.CONFIGS

    def config_file(self, name: str) -> Path:
        """``configs/NAME`` (``config.toml``, ``local.json``, ``hosted.toml``, ``trainer_args.json``...)."""
        return self.configs / name

    @property
    def resolved_config(self) -> Path:
        return self.config_file("resolved.json")

    @property
    def config_toml(self) -> Path:
        return self.config_file("config.toml")

    @property
    def status_path(self) -> Path:
        return self.root / self.STATUS

    @property
    def trace_path(self) -> Path:
        return self.root / self.TRACE

    @property
    def metrics_path(self) -> Path:
        return self.root / self.METRICS

    @property
    def trackers_dir(self) -> Path:
        return self.root / self.TRACKERS

    @property
    def samples_path(self) -> Path:
        return self.root / self.SAMPLES

    @property
    def logs(self) -> Path:
        return self.root / self.LOGS

    def eval_file(self, env: str) -> Path:
        """``evals/<env slug>.json``: the latest evaluation of this run's model on ``env``."""
        from primenb.protocol.safepath import slug

        return self.root / self.EVALS / f"{slug(env)}.json"

    def log_file(self, component: str) -> Path:
        """``logs/COMPONENT.log`` (``engine``, ``launcher``, a hosted run's components)."""
        return self.logs / f"{component}.log"

    @property
    def log_path(self) -> Path:
        return self.log_file("engine")

    @property
    def launcher_log(self) -> Path:
        return self.log_file("launcher")

    @property
    def launcher_path(self) -> Path:
        return self.root / self.LAUNCHER

    @property
    def remote_launcher_path(self) -> Path:
        return self.root / self.REMOTE_LAUNCHER

    @property
    def checkpoints(self) -> Path:
        return self.root / self.CHECKPOINTS

    @property
    def stop_path(self) -> Path:
        return self.root / self.STOP

    def path(self, name: str) -> Path:
        """A file of the run directory named by one of the constants above (``RunDir.STATUS``...)."""
        return self.root / name

    def checkpoint_dir(self, step: int | str) -> Path:
        return self.checkpoints / (f"step_{step}" if isinstance(step, int) else step)

    @property
    def warmup_checkpoint(self) -> Path:
        return self.checkpoints / self.WARMUP_CHECKPOINT

    def is_run_dir(self) -> bool:
        """Whether the folder looks like a run directory (a status or a resolved config)."""
        return self.status_path.exists() or self.resolved_config.exists()

    def list_checkpoints(self) -> list[tuple[int, Path]]:
        """``(step, path)`` of every ``checkpoints/step_N`` folder, oldest first."""
        if not self.checkpoints.is_dir():
            return []
        found = []
        for child in self.checkpoints.iterdir():
            step = checkpoint_step(child.name)
            if step is not None and child.is_dir():
                found.append((step, child))
        return sorted(found)

    # readers: every one goes through `primenb.protocol.reader` (regular files, bounded)
    def read_config(self) -> dict[str, Any]:
        value, why = reader.read_json(self.resolved_config)
        if why is not None:
            if why == "missing":
                raise FileNotFoundError(2, "No such file or directory", str(self.resolved_config))
            raise ValueError(f"{self.resolved_config} is {why}")
        if not isinstance(value, dict):
            raise ValueError(f"{self.resolved_config} does not hold a JSON object")
        return value

    def read_status(self) -> dict[str, Any]:
        """status.json typed (`primenb.protocol.documents.StatusDoc`): wrong-typed fields are left
        out (``.warnings`` says which); ``{}`` when missing or unreadable."""
        return read_status(self.status_path)

    def status_doc(self) -> StatusDoc:
        """status.json as a `StatusDoc`, what a consumer reads fields from (mypy sees each one);
        an empty document when missing or unreadable."""
        return read_status_doc(self.status_path)

    def read_launcher(self) -> dict[str, Any]:
        """launcher.json: the process group the local launcher started."""
        return reader.read_json_object(self.launcher_path)

    def log_tail(self, n: int = 20) -> list[str]:
        """The engine log's last ``n`` lines, else the launcher log's (an engine that never started)."""
        return tail_lines(self.log_path, n) or tail_lines(self.launcher_log, n)

    def stop_requested(self) -> bool:
        return self.stop_path.exists()


CLAIM_FILE = ".primenb-run"  # created with O_EXCL by the one launch that owns the folder


def claim_run_dir(run_dir: Path, *, taken: str) -> None:
    """Create ``run_dir`` (parents too) and claim it for one launch; `PrimenbError` with ``taken``
    when it already holds a run or another launch claimed it first, and a plain message when the
    folder cannot be made (a file in the way, read-only, /dev/null)."""
    from primenb.errors import PrimenbError

    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        busy = any(run_dir.iterdir())
    except OSError as exc:
        raise PrimenbError(
            f"cannot create the run directory {run_dir}: {exc.strerror or exc}"
            f"{' (' + str(exc.filename) + ')' if exc.filename else ''}; set output_dir to a writable folder"
        ) from None
    if busy:
        raise PrimenbError(taken)
    try:
        fd = os.open(run_dir / CLAIM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise PrimenbError(taken) from None
    except OSError as exc:
        raise PrimenbError(f"cannot write in the run directory {run_dir}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{os.getpid()} {socket.gethostname()} {now_iso()}\n")


def record_run(run_dir: Path) -> None:
    """Remember a run directory so `attach(NAME)` finds it from any working directory."""
    from primenb.home import prime_home

    with open(prime_home() / RUN_INDEX, "a", encoding="utf-8") as fh:
        fh.write(str(run_dir.resolve()) + "\n")


class StatusFile:
    """The engine's view of ``status.json``: keeps the fields in memory, rewrites atomically."""

    def __init__(self, run_dir: RunDir, *, enabled: bool = True) -> None:
        self.run_dir = run_dir
        self.enabled = enabled
        self.data: dict[str, Any] = run_dir.read_status() if enabled else {}
        self._last_write = 0.0

    def update(self, *, throttle_s: float = 0.0, **fields: Any) -> None:
        self.data.update(fields)
        if not self.enabled:
            return
        t = time.monotonic()
        if throttle_s and t - self._last_write < throttle_s:
            return
        self.data["updated_at"] = now_iso()
        try:
            atomic_write_json(self.run_dir.status_path, self.data)
        except OSError as exc:  # a read-only or full run directory: never a second failure
            logging.getLogger("primenb.engine").warning("cannot update %s: %s", self.run_dir.status_path, exc)
        self._last_write = t

    def start(self, **fields: Any) -> None:
        self.update(
            version=STATUS_VERSION,
            state=RUNNING,
            pid=os.getpid(),
            ppid=os.getppid(),
            host=socket.gethostname(),
            started_at=now_iso(),
            ended_at=None,
            error=None,
            log_tail=None,
            step=0,
            **fields,
        )

    def finish(self, state: str, **fields: Any) -> None:
        assert state in FINAL_STATES, state
        self.update(state=state, ended_at=now_iso(), **fields)


__all__ = [
    "BUILDING_MODEL",
    "BUILDING_TRAINER",
    "CLAIM_FILE",
    "COMPLETED",
    "DONE",
    "FAILED",
    "FINAL_STATES",
    "IMPORTING",
    "LIVE_STATES",
    "PHASES",
    "QUEUED",
    "RUNNING",
    "RUN_INDEX",
    "SAVING",
    "SFT_WARMUP",
    "STARTING",
    "STATES",
    "STOPPED",
    "TRAINING",
    "JsonlWriter",
    "RunDir",
    "State",
    "StatusFile",
    "atomic_write_json",
    "checkpoint_step",
    "claim_run_dir",
    "finite_numbers",
    "metric_row",
    "now_iso",
    "read_jsonl",
    "read_metrics",
    "record_run",
    "tail_lines",
]
