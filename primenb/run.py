"""`Run`: one training run, seen through its run directory (the source of truth).

Works the same for a run this kernel launched, one launched before a kernel restart, and one
launched from a terminal: everything is read from the files the engine writes.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from primenb.errors import PrimenbError
from primenb.home import prime_home
from primenb.protocol.documents import State, is_final_state
from primenb.protocol.liveness import group_alive, signal_group
from primenb.protocol.rundir import (
    RUN_INDEX,
    RunDir,
    atomic_write_json,
    now_iso,
    read_jsonl,
    read_metrics,
)

if TYPE_CHECKING:
    import subprocess

    import pandas as pd


class RunControl(Protocol):
    """How a backend keeps a run it launched readable and stoppable from here (see
    `primenb.backends.base`). A local run needs none: its directory is the live one."""

    def sync(self) -> None:
        """Bring the local run directory up to date (a remote backend: only new bytes)."""

    def alive(self) -> bool | None:
        """Whether the training process still runs; None when that cannot be told now."""

    def request_stop(self, *, force: bool) -> None:
        """Ask the run to checkpoint and stop (``force``: end it now)."""


class Run:
    """A training run: `.status`, `.metrics`, `.samples`, `.stop()`, `.wait()`, `.logs()`, `.dir`
    (`.metrics_raw`, `.samples_raw`, `.metric_rows()`: the rows as the engine wrote them)."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        *,
        process: subprocess.Popen[bytes] | None = None,
        control: RunControl | None = None,
    ) -> None:
        self.files = RunDir(run_dir)
        self.dir = self.files.root.resolve()
        self.name = self.dir.name
        self._process = process
        self._control = control

    def _sync(self) -> None:
        if self._control is not None:
            self._control.sync()

    # -- state ---------------------------------------------------------------------------
    @property
    def status(self) -> dict[str, Any]:
        """status.json, with `state` reported as `failed` when the process vanished mid-run.

        Reading never writes: `refresh()` records a vanished process on disk."""
        return self._read()[0]

    def refresh(self) -> dict[str, Any]:
        """The status; when the process vanished without a final one, also write that it failed."""
        status, vanished = self._read()
        if vanished:
            try:
                atomic_write_json(self.files.status_path, status)
            except OSError as exc:  # a read-only run directory: report it failed all the same
                status["error"] = f"{status.get('error')} (status.json could not be updated: {exc.strerror or exc})"
        return status

    def _read(self) -> tuple[dict[str, Any], bool]:
        self._sync()
        status = self.files.read_status()
        if self._process is not None:
            self._process.poll()  # reap a finished child so its pid is free
        # no state at all (status.json missing or unreadable) counts as live: a dead process ends it
        if not is_final_state(status.get("state")) and not self._alive(status):
            status = self.files.read_status()  # it may have just finished
            if not is_final_state(status.get("state")):
                return self._vanished(status), True
        return status, False

    def _vanished(self, status: dict[str, Any]) -> dict[str, Any]:
        """The process is gone without a final status (killed, out of memory)."""
        code = self._process.returncode if self._process is not None else None
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with code {code}"
            if code is not None
            else "ended"
        )
        return {
            **status,
            "state": State.FAILED,
            "ended_at": now_iso(),
            "log_tail": self.logs(20).splitlines(),
            "error": f"the training process {how} without writing a final status "
            f"(checkpoints so far are kept: {len(self.checkpoints)})",
        }

    @property
    def state(self) -> State:
        """The run's `State` (a string: ``"running"``...), `State.UNKNOWN` when status.json has
        none. `status` is the whole status document."""
        return State.of(self.status.get("state"))

    @property
    def done(self) -> bool:
        return is_final_state(self.state)

    def _alive(self, status: dict[str, Any]) -> bool:
        if self._process is not None:
            return self._process.poll() is None
        if self._control is not None:
            alive = self._control.alive()
            return True if alive is None else alive  # unknown: trust the status file
        alive = group_alive(self.launcher)  # pgid + start time: a reused pgid is not ours
        if alive is None:
            # no launcher record yet (queued), or another machine's process: trust the status file,
            # unless there is no status at all and nothing was ever launched
            return bool(status) or self.files.launcher_path.exists()
        return alive

    @property
    def launcher(self) -> dict[str, Any]:
        """launcher.json: the process group the launcher started (local backend)."""
        return self.files.read_launcher()

    # -- data ----------------------------------------------------------------------------
    @property
    def config(self) -> dict[str, Any]:
        return self.files.read_config()

    def metric_rows(self) -> list[dict[str, Any]]:
        self._sync()
        return read_metrics(self.files.metrics_path)  # objects with an int step, numbers only

    @property
    def metrics(self) -> pd.DataFrame:
        """One row per (phase, step): train and eval values merged, ``time`` a UTC Timestamp, the
        columns people look at first leading (`primenb.render.tidy.metrics_frame`)."""
        from primenb.render.tidy import metrics_frame

        self._sync()
        return metrics_frame(read_jsonl(self.files.metrics_path))

    @property
    def metrics_raw(self) -> pd.DataFrame:
        """metrics.jsonl as written: one row per record (train log, eval, end), epoch-second times."""
        import pandas as pd

        self._sync()
        return pd.DataFrame(list(read_jsonl(self.files.metrics_path)))

    @property
    def samples(self) -> pd.DataFrame:
        """Sampled completions: Timestamps, reward components as ``rewards/<name>`` columns, and a
        notebook view with the text left-aligned and wrapped (`primenb.render.tidy.samples_frame`)."""
        from primenb.render.tidy import samples_frame

        self._sync()
        return samples_frame(read_jsonl(self.files.samples_path))

    @property
    def samples_raw(self) -> pd.DataFrame:
        """samples.jsonl as written."""
        import pandas as pd

        self._sync()
        return pd.DataFrame(list(read_jsonl(self.files.samples_path)))

    @property
    def checkpoints(self) -> list[Path]:
        return [p for _, p in self.files.list_checkpoints()]

    def logs(self, n: int = 50) -> str:
        """The last ``n`` log lines: a `str` that prints as lines and shows as a scrollable block
        in a notebook (`primenb.render.tidy.LogText`)."""
        from primenb.render.tidy import LogText, clean_log_lines

        return LogText("\n".join(clean_log_lines(self.files.log_tail(n))))

    # -- control -------------------------------------------------------------------------
    def stop(self, *, wait: bool = True, timeout: float = 120.0, force: bool = False) -> str:
        """Ask the engine to save a final checkpoint and end as `stopped`.

        `force=True` (or a run that ignores the request for `timeout` seconds) kills its
        process group instead; checkpoints already written are kept."""
        if is_final_state(self.refresh().get("state")):
            return self.state
        launcher = self.launcher
        if self._control is not None:
            self._control.request_stop(force=force)
        else:
            try:
                self.files.stop_path.touch()
            except OSError:  # read-only run directory: the engine also stops cleanly on SIGTERM
                signal_group(launcher, signal.SIGTERM)
            if force:
                signal_group(launcher, signal.SIGKILL)
        if not wait:
            return self.state
        try:
            return self.wait(timeout=timeout)
        except TimeoutError:
            if self._control is not None:
                self._control.request_stop(force=True)
            else:
                signal_group(launcher, signal.SIGKILL)  # only a group verifiably ours
            self.wait(timeout=10)
            return self.state

    def wait(self, timeout: float | None = None, poll: float = 0.5) -> str:
        """Block until the run ends; returns its final state."""
        end = None if timeout is None else time.monotonic() + timeout
        while not is_final_state(self.refresh().get("state")):
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"run {self.name} still {self.state} after {timeout}s")
            time.sleep(poll)
        if self._process is not None:
            self._process.wait(timeout=30)
        return self.state

    # -- display: text and HTML here; the notebook extension registers the live monitor ----
    def __repr__(self) -> str:
        from primenb.render.summary import run_text

        return run_text(self)

    def _repr_html_(self) -> str:
        from primenb.render.summary import run_html

        return run_html(self)


def find_run(name_or_dir: str | os.PathLike[str], output_dir: str = "outputs") -> Path:
    """A run directory from a path, `output_dir/NAME`, or the index of launched runs (newest first)."""
    direct = Path(name_or_dir)
    for candidate in (direct, Path(output_dir) / direct):
        if RunDir(candidate).is_run_dir():
            return candidate
    index = prime_home() / RUN_INDEX
    if index.exists():
        for line in reversed(index.read_text().splitlines()):
            path = Path(line)
            if path.name == str(name_or_dir) and path.is_dir():
                return path
    raise PrimenbError(
        f"no run named {str(name_or_dir)!r} (looked in {Path(output_dir) / direct} and the run "
        f"index {index}); pass the run directory itself"
    )
