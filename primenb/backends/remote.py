"""A local mirror of a remote run directory, kept current by `RemoteMirror.sync` (a `RunControl`).

Only new bytes of the appended files travel (the local file's size is the offset, so a restarted
kernel resumes where the mirror stopped); status.json and launcher.json are replaced whole. A cut
connection is retried with back-off and never loses a row: the remote files keep growing and the
next sync reads from the mirror's offsets. When the run ends, its final checkpoint and trace.json
come back so `primenb.load(trace)` works here.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any, Protocol

from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json
from primenb.protocol.documents import StatusDoc, parse
from primenb.protocol.reader import loads, read_json_object
from primenb.protocol.rundir import FAILED, FINAL_STATES, LIVE_STATES, RunDir, checkpoint_step, now_iso

log = logging.getLogger("primenb.backends")

REMOTE_FILE = RunDir.REMOTE  # in the mirror: how to reach the remote run again (no secrets)
APPENDED = (RunDir.METRICS, RunDir.SAMPLES, RunDir.ENGINE_LOG, RunDir.LAUNCHER_LOG)  # = agent.APPENDED


class Channel(Protocol):
    """The remote end: runs the agent (`primenb.backends.agent`) and streams files back."""

    def agent(self, *args: str) -> dict[str, Any]: ...

    def fetch(self, remote_dir: str, paths: list[str], local_dir: Path) -> None: ...

    def describe(self) -> str: ...


def read_remote(run_dir: Path) -> dict[str, Any]:
    return read_json_object(RunDir(run_dir).path(REMOTE_FILE))


def write_remote(run_dir: Path, info: dict[str, Any]) -> None:
    atomic_write_json(RunDir(run_dir).path(REMOTE_FILE), info)


class RemoteMirror:
    """`RunControl` for a run whose directory lives on another machine."""

    def __init__(
        self,
        local_dir: Path,
        channel: Channel,
        remote_dir: str,
        *,
        min_interval: float = 1.0,
        stopper: Any = None,
    ) -> None:
        self.local = RunDir(local_dir)
        self.channel = channel
        self.remote_dir = remote_dir
        self.min_interval = min_interval
        self.stopper = stopper  # optional callable(force) replacing the agent's stop (e.g. scancel)
        self._last = 0.0
        self._next_try = 0.0
        self._failures = 0
        self._alive: bool | None = None
        self._checkpoints: list[str] = []
        self.last_error: str | None = None

    # -- RunControl --------------------------------------------------------------------------
    def sync(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and (now < self._next_try or now - self._last < self.min_interval):
            return
        if self._local_final() and read_remote(self.local.root).get("fetched"):
            return
        self._last = now
        try:
            self._sync_once()
        except PrimenbError as exc:
            self._lost(str(exc))
        else:
            self._failures, self._next_try, self.last_error = 0, 0.0, None

    def alive(self) -> bool | None:
        return self._alive

    def request_stop(self, *, force: bool) -> None:
        if self.stopper is not None:
            self.stopper(force)
        else:
            self.channel.agent("stop", self.remote_dir, "1" if force else "0")
        self.sync(force=True)

    # -- the work ------------------------------------------------------------------------------
    def _offsets(self) -> dict[str, int]:
        out = {}
        for name in APPENDED:
            path = self.local.root / name
            out[name] = path.stat().st_size if path.exists() else 0
        return out

    def _sync_once(self) -> None:
        suspicious = 0
        for _ in range(50):  # a long backlog arrives in chunks; each pass moves on
            result = self.channel.agent("sync", self.remote_dir, json.dumps(self._offsets()))
            if not result.get("exists"):
                self._fail_locally(f"the remote run directory {self.remote_dir} ({self.channel.describe()}) is gone")
                return
            status = self._apply(result)
            if result.get("more"):
                continue
            if status.get("state") in LIVE_STATES and result.get("alive") is False:
                # The engine may have written its final status after we read it: look once more.
                suspicious += 1
                if suspicious < 2:
                    continue
                self._fail_locally(
                    f"the training process on {self.channel.describe()} ended without writing a final status"
                )
            break
        if self._local_final() and not read_remote(self.local.root).get("fetched"):
            self.fetch_artifacts()

    def _apply(self, result: dict[str, Any]) -> dict[str, Any]:
        files: dict[str, dict[str, Any]] = result.get("files") or {}
        for name in APPENDED:
            part = files.get(name)
            if not part:
                continue
            path = self.local.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            data = base64.b64decode(part["data"])
            with open(path, "r+b" if path.exists() else "wb") as fh:
                if part.get("replace"):
                    fh.truncate(0)
                fh.seek(int(part.get("offset", 0)))
                fh.write(data)
        if RunDir.LAUNCHER in files:
            self.local.remote_launcher_path.write_bytes(base64.b64decode(files[RunDir.LAUNCHER]["data"]))
        status: dict[str, Any] = {}
        if RunDir.STATUS in files:
            try:
                status = parse(StatusDoc, loads(base64.b64decode(files[RunDir.STATUS]["data"]))) or {}
            except ValueError:
                status = {}
        self._alive = result.get("alive")
        self._checkpoints = [str(c) for c in result.get("checkpoints") or []]
        if status and not self._local_final():  # a final state here is never undone by the remote
            atomic_write_json(self.local.status_path, status)
        return status

    def _local_final(self) -> bool:
        return self.local.read_status().get("state") in FINAL_STATES

    def _fail_locally(self, why: str) -> None:
        status = self.local.read_status()
        if status.get("state") in FINAL_STATES:
            return
        atomic_write_json(
            self.local.status_path,
            {
                **status,
                "state": FAILED,
                "ended_at": now_iso(),
                "error": why,
                "log_tail": self.local.log_tail(20),
            },
        )
        self._alive = False

    def _lost(self, why: str) -> None:
        """Keep what we have, note the cut in the local status, retry later (1 s, 2 s, ... 30 s)."""
        self._failures += 1
        delay = min(30.0, 2.0 ** (self._failures - 1))
        self._next_try = time.monotonic() + delay
        self._alive = None
        self.last_error = why
        log.info("sync of %s failed (%s); retrying in %.0fs", self.local.root, why, delay)
        status = self.local.read_status()
        if status.get("state") in LIVE_STATES:
            status["connection"] = {"ok": False, "error": why, "retry_in_s": delay, "since": now_iso()}
            atomic_write_json(self.local.status_path, status)

    # -- artifacts -----------------------------------------------------------------------------
    def fetch_artifacts(self) -> Path:
        """Bring back trace.json, the trackers' local files (W&B offline runs to `wandb sync` from
        here, event files, stores) and the final checkpoint; point the trace at this mirror and
        index it here."""
        status = self.local.read_status()
        wanted = [RunDir.TRACE, RunDir.TRACKERS]
        final = status.get("final_checkpoint")
        numbered = sorted((n, p) for p in self._checkpoints if (n := checkpoint_step(p)) is not None)
        remote_ckpts = [p for _, p in numbered]
        if final and str(final).startswith(self.remote_dir):
            wanted.append(str(final)[len(self.remote_dir) :].lstrip("/"))
        elif remote_ckpts:
            wanted.append(f"checkpoints/{remote_ckpts[-1]}")
        self.channel.fetch(self.remote_dir, wanted, self.local.root)
        doc = self._relocate()
        info = read_remote(self.local.root)
        tries = int(info.get("fetch_tries", 0)) + 1
        # The engine completes its trace just after its final status: fetch again until it has.
        done = doc is not None and doc.get("status") in FINAL_STATES
        if not done and tries >= 5:
            from primenb.protocol.record import reconcile

            done = not doc or reconcile(doc, self.local.root) or doc.get("status") in FINAL_STATES
        info.update(fetch_tries=tries, fetched=done, fetched_at=now_iso(), fetched_paths=wanted)
        write_remote(self.local.root, info)
        return self.local.root

    def _relocate(self) -> dict[str, Any] | None:
        """Remote paths in status.json and trace.json become this mirror's paths."""
        local = str(self.local.root.resolve())

        def swap(value: Any) -> Any:
            if isinstance(value, str) and value.startswith(self.remote_dir):
                return local + value[len(self.remote_dir) :]
            if isinstance(value, dict):
                return {k: swap(v) for k, v in value.items()}
            if isinstance(value, list):
                return [swap(v) for v in value]
            return value

        atomic_write_json(self.local.status_path, swap(self.local.read_status()))
        from primenb.protocol.index import index_trace
        from primenb.protocol.record import read_trace, write_trace

        doc = read_trace(self.local.root)
        if doc:
            doc = swap(doc)
            doc["run_dir"] = local
            doc["remote_run_dir"] = self.remote_dir
            write_trace(self.local.root, doc)
            index_trace(doc, self.local.root)
        return doc


__all__ = ["REMOTE_FILE", "Channel", "RemoteMirror", "read_remote", "write_remote"]
