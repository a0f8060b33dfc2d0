"""The local mirror of a hosted run: `HostedControl` (a `RunControl`) reads what is new from the
platform through the `prime` CLI into the run directory, so `Run`, the monitor, the harness and
the sidebar read a hosted run like any other; and the checkpoint fetch behind ``primenb.load``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from primenb.backends import answers
from primenb.backends.answers import id_args
from primenb.backends.primecli import PlatformUnreachable, PrimeCLI, PrimeCLIError, RunGone
from primenb.backends.remote import read_remote, write_remote
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json, atomic_write_text
from primenb.protocol import metrics as M
from primenb.protocol.privacy import WITHHELD, run_denies, withheld_or, withhold_sample
from primenb.protocol.rundir import COMPLETED, FAILED, FINAL_STATES, QUEUED, RUNNING, STOPPED, RunDir, now_iso

STATES = {
    "QUEUED": QUEUED,
    "PENDING": QUEUED,
    "RUNNING": RUNNING,
    "PAUSING": RUNNING,
    "COMPLETED": COMPLETED,
    "FAILED": FAILED,
    "STOPPED": STOPPED,
    "PAUSED": STOPPED,  # a paused run id never runs again: `resume` starts a new one
}
LOG_COMPONENTS = ("orchestrator", "trainer")  # each is one CLI call
LOG_EVERY = 6  # polls between live log fetches while a run trains (~30 s at the default 5 s)

# -- the mirror ------------------------------------------------------------------------------


class HostedControl:
    """`RunControl` of a hosted run: each sync reads what is new from the platform into the mirror."""

    def __init__(self, run_dir: Path, cli: PrimeCLI, *, min_interval: float = 5.0) -> None:
        self.files = RunDir(run_dir)
        previous = cli.on_retry

        def on_retry(message: str) -> None:
            self._retrying(message)
            if previous is not None:
                previous(message)

        # a copy per run: its retry notes go to this run's status only
        self.cli = dataclasses.replace(cli, on_retry=on_retry, calls=[])
        self.min_interval = min_interval
        self._last = 0.0
        self._syncs = 0
        self._lock = threading.Lock()
        self.last_error: str | None = None
        info = read_remote(run_dir)
        self.run_id = str(info.get("run_id"))

    # -- RunControl --------------------------------------------------------------------------
    def sync(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return
        if self._final() and read_remote(self.files.root).get("fetched"):
            return
        if not self._lock.acquire(blocking=force):
            return  # another thread (the monitor) is syncing right now
        try:
            self._last = now
            self._sync_once()
            self.last_error = None
        except RunGone as exc:
            mark_status(self.files.root, FAILED, error=str(exc))
            self._complete_trace()
        except PrimeCLIError as exc:  # 401, 402, unreachable after retries, not JSON: say so, keep going
            self.last_error = str(exc)
            status = self.files.read_status()
            if status.get("state") not in FINAL_STATES:
                kind = "platform unreachable, retrying" if isinstance(exc, PlatformUnreachable) else str(exc)
                mark_status(
                    self.files.root, None, connection={"ok": False, "error": str(exc), "since": now_iso()}, note=kind
                )
        finally:
            self._lock.release()

    def alive(self) -> bool | None:
        return None  # the platform's status (mirrored into status.json) is the truth

    def request_stop(self, *, force: bool) -> None:
        self.cli.text("train", "stop", *id_args("--force", ident=self.run_id))
        self.sync(force=True)

    # -- platform-only controls ------------------------------------------------------------
    def pause(self) -> str:
        self.cli.text("train", "pause", *id_args("--force", ident=self.run_id), retry=False)
        self.sync(force=True)
        return str(self.files.read_status().get("platform_status") or "PAUSING")

    # -- the work ------------------------------------------------------------------------------
    def _retrying(self, message: str) -> None:
        status = self.files.read_status()
        if status.get("state") not in FINAL_STATES:
            mark_status(
                self.files.root, None, connection={"ok": False, "error": message, "since": now_iso()}, note=message
            )

    def _final(self) -> bool:
        return self.files.read_status().get("state") in FINAL_STATES

    def _sync_once(self) -> None:
        info = read_remote(self.files.root)
        record = answers.run_record(self.cli.json("train", "get", *id_args("-o", "json", ident=self.run_id)))
        platform = record.status
        state = STATES.get(platform, RUNNING)
        fields: dict[str, Any] = {
            "platform_status": platform,
            "connection": {"ok": True, "checked_at": now_iso()},
            "hosted": public_info(info),
        }
        note = f"{platform.lower()} on the platform"
        fields["queue"] = None
        if platform in ("QUEUED", "PENDING"):
            ahead, reason = record.runs_ahead, record.queue_reason
            fields["queue"] = {"position": ahead, "reason": reason}
            note = (
                f"{QUEUED}"
                + (f": {ahead} run(s) ahead" if ahead is not None else "")
                + (f" ({reason})" if reason else "")
            )
        if state != QUEUED:
            self._pull_progress(fields)
            cost = _cost(record, info)
            if cost is not None:
                fields["cost"] = cost
                gpu = info.get("gpu_type") or "GPUs"
                spent = "in total" if state in FINAL_STATES else "so far"
                note = f"{platform.lower()} on {gpu} · ${cost['usd']:.2f} {spent} (${cost['per_hour']:.2f}/hour)"
        if platform == "PAUSED":
            fields["paused"] = True
            note = f"paused: continue it with %prime_train --resume {self.files.root.name} (a new run, a child trace)"
        if record.error_message:
            fields["error"] = withheld_or(record.error_message) if self._denies() else record.error_message
        self._syncs += 1
        if state in FINAL_STATES:
            fields["ended_at"] = now_iso()
            self._pull_logs()
            self._pull_checkpoints()
        elif state == RUNNING and self._syncs % LOG_EVERY == 0:
            self._pull_logs()  # live logs per component, every LOG_EVERY polls (two CLI calls)
        mark_status(self.files.root, state, note=note, **fields)
        if state in FINAL_STATES:
            self._complete_trace()

    def _pull_progress(self, fields: dict[str, Any]) -> None:
        progress = answers.progress(self.cli.json("train", "progress", *id_args(ident=self.run_id)))
        latest = progress.latest_step
        rows = read_jsonl_steps(self.files.metrics_path)
        last = max(rows, default=0)
        if isinstance(latest, int) and latest > last:
            got = answers.metrics(
                self.cli.json("train", "metrics", *id_args("--min-step", str(last + 1), ident=self.run_id))
            )
            new = [r for r in map(metric_record, got) if r is not None and r["step"] > last]
            _append(self.files.metrics_path, sorted(new, key=lambda r: r["step"]))
        if isinstance(latest, int):
            fields["step"] = latest
        seen = read_jsonl_steps(self.files.samples_path)
        with_samples = [s for s in progress.steps_with_samples if s not in seen]
        for step in with_samples[-1:]:  # the newest: older ones stay one `prime train rollouts` away
            got_samples = answers.samples(
                self.cli.json("train", "rollouts", *id_args("--step", str(step), "--num", "8", ident=self.run_id))
            )
            kept = [sample_record(s, step) for s in got_samples]
            _append(self.files.samples_path, [withhold_sample(r) for r in kept] if self._denies() else kept)

    def _denies(self) -> bool:
        """The run's own config says data_collection = "deny" (read each time: it is the run's)."""
        return run_denies(self.files)

    def _pull_logs(self) -> None:
        if self._denies():  # platform logs quote prompts and completions: none is kept here
            note = f"(platform logs not kept here: {WITHHELD}; read them with `prime train logs {self.run_id}`)\n"
            for component in LOG_COMPONENTS:
                atomic_write_text(self.files.log_file(component), note)
            atomic_write_text(self.files.log_path, note)
            return
        parts = []
        for component in LOG_COMPONENTS:
            try:
                args = id_args("-c", component, "--raw", "-n", "500", ident=self.run_id)
                text = self.cli.text("train", "logs", *args, retry=False)
            except PrimeCLIError as exc:
                text = f"(no {component} logs: {exc})"
            atomic_write_text(self.files.log_file(component), text)
            parts.append(f"==> {component} <==\n{text.rstrip()}\n")
        atomic_write_text(self.files.log_path, "\n".join(parts))

    def _pull_checkpoints(self) -> None:
        data = self.cli.json("train", "checkpoints", *id_args("-o", "json", ident=self.run_id))
        answers.checkpoints(data)  # a shape we do not know is an error, not a file written
        atomic_write_json(self.files.path(RunDir.HOSTED_CHECKPOINTS), data)

    def _complete_trace(self) -> None:
        from primenb.protocol.index import index_trace
        from primenb.protocol.record import complete_from_run_dir, read_trace, write_trace

        doc = read_trace(self.files.root)
        if doc is None:
            return
        status = self.files.read_status()
        complete_from_run_dir(doc, self.files.root, status)
        hosted = doc.setdefault("hosted", {})
        hosted.update(platform_status=status.get("platform_status"), cost=status.get("cost"))
        write_trace(self.files.root, doc)
        index_trace(doc, self.files.root)
        write_remote(self.files.root, {**read_remote(self.files.root), "fetched": True})


# -- records ---------------------------------------------------------------------------------


def metric_record(rec: Any) -> dict[str, Any] | None:
    """A platform metric record as a metrics.jsonl row: flat ``{"step", name: value}`` or nested
    ``{"step", "metrics": {...}}`` (the record shape is undocumented); ``reward/mean`` also
    becomes ``reward`` and ``loss/mean`` ``loss`` (the metrics table's aliases), the names the
    monitor looks for first."""
    from primenb.protocol.rundir import finite_numbers

    if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
        return None
    nested = rec.get("metrics")
    values: dict[str, Any] = nested if isinstance(nested, dict) else rec
    row: dict[str, Any] = {"step": rec["step"], **finite_numbers({k: v for k, v in values.items() if k != "step"})}
    return M.with_main_names(row)


def sample_record(sample: Any, step: int) -> dict[str, Any]:
    """A platform rollout as a samples.jsonl row (prompt/completion as text)."""

    def text(value: Any) -> str:
        if isinstance(value, list):
            return "\n".join(str(m.get("content", "")) if isinstance(m, dict) else str(m) for m in value)
        return "" if value is None else str(value)

    sample = sample if isinstance(sample, dict) else {}
    row = {
        "step": sample.get("step", step),
        "prompt": text(sample.get("prompt")),
        "completion": text(sample.get("completion")),
    }
    if isinstance(sample.get("reward"), (int, float)):
        row["reward"] = sample["reward"]
    return row


def read_jsonl_steps(path: Path) -> set[int]:
    from primenb.protocol.rundir import read_jsonl

    return {r["step"] for r in read_jsonl(path) if isinstance(r.get("step"), int)}


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, allow_nan=False) + "\n")


def _cost(record: answers.RunRecord, info: dict[str, Any]) -> dict[str, Any] | None:
    price, gpus = info.get("price_per_gpu_hour"), info.get("gpus") or 1
    if not isinstance(price, (int, float)) or not isinstance(gpus, int):
        return None
    started = _when(record.started_at)
    if price is None or started is None:
        return None
    ended = _when(record.completed_at) or datetime.now(started.tzinfo)
    hours = max(0.0, (ended - started).total_seconds() / 3600)
    return {
        "usd": round(hours * float(price) * gpus, 4),
        "per_hour": float(price) * gpus,
        "elapsed_s": round(hours * 3600),
    }


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def public_info(info: dict[str, Any]) -> dict[str, Any]:
    keep = (
        "run_id",
        "team",
        "gpu_type",
        "gpus",
        "price_per_gpu_hour",
        "estimated_cost_per_hour",
        "volume",
        "dashboard",
        "resumed_from",
    )
    return {k: info.get(k) for k in keep if info.get(k) is not None}


def mark_status(run_dir: Path, state: str | None, **fields: Any) -> None:
    files = RunDir(run_dir)
    status = files.read_status()
    if status.get("state") in FINAL_STATES and state is not None and state != status.get("state"):
        return  # a final state here is never undone
    if state is not None:
        status["state"] = state
        if state == FAILED:
            status.setdefault("ended_at", now_iso())
    status.update(fields)
    atomic_write_json(files.status_path, status)


def record_hosted_in_trace(run_dir: Path, info: dict[str, Any]) -> None:
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import read_trace, write_trace

    doc = read_trace(run_dir)
    if doc is None:
        return
    doc["hosted"] = public_info(info)
    write_trace(run_dir, doc)
    index_trace(doc, run_dir)


# -- checkpoints -----------------------------------------------------------------------------


def hosted_info(run_dir: Path) -> dict[str, Any]:
    """The platform facts of a hosted run (``remote.json``, with its platform run id), or a
    message saying this run is not one and what to use instead."""
    info = read_remote(run_dir)
    if not info.get("run_id"):
        raise PrimenbError(
            f"{run_dir.name} is not a hosted run (no platform run id in "
            f"{RunDir(run_dir).path(RunDir.REMOTE)}): pause, resume, "
            "hosted continuations and checkpoint fetches are for runs launched with --backend modelfactory; "
            "continue any other run with %prime_harness apply"
        )
    return info


def fetch_checkpoint(run_dir: Path, cli: PrimeCLI | None = None) -> Path:
    """The latest READY checkpoint of a hosted run, copied to ``checkpoints/step_N`` here; a
    `PrimenbError` saying exactly why when it cannot be (none ready, storage out of reach)."""
    from urllib.parse import unquote, urlsplit

    info = hosted_info(run_dir)
    cli = cli or PrimeCLI(team=info.get("team"))
    rid = answers.run_id(info["run_id"], "train checkpoints")
    found = answers.checkpoints(cli.json("train", "checkpoints", *answers.id_args("-o", "json", ident=rid)))
    ready = [c for c in found if c.status == "READY"]
    if not ready:
        states = ", ".join(f"step {c.step}: {c.status}" for c in found) or "none yet"
        raise PrimenbError(f"hosted run {rid} has no READY checkpoint ({states}); try again once one is READY")
    best = max(ready, key=lambda c: c.step)
    url = best.storage_url
    target = RunDir(run_dir).checkpoint_dir(best.step)
    parts = urlsplit(url)
    if parts.scheme in ("file", ""):
        source = Path(unquote(parts.path))
        root = storage_root()
        # the platform's answer names the folder: only one inside the storage cache we own is read,
        # never any local folder (a hostile answer could point at ~/.ssh)
        if not _inside(source, root):
            raise PrimenbError(
                f"hosted run {rid}: checkpoint step {best.step} is at {url}, outside primenb's hosted storage "
                f"cache ({root}); nothing was copied. Put the checkpoint under {root} (or download it to {target}) "
                "and try again"
            )
        if source.is_dir():
            if not target.exists():
                shutil.copytree(source, target, symlinks=True)  # links stay links: nothing outside is read
            status = RunDir(run_dir).read_status()
            atomic_write_json(RunDir(run_dir).status_path, {**status, "final_checkpoint": str(target)})
            return target
    raise PrimenbError(
        f"hosted run {rid}: checkpoint step {best.step} is READY at {url}, but primenb cannot "
        f"read the platform's storage from here (no {parts.scheme or 'storage'} access); download it to {target} "
        "with the platform's tools, then load that folder"
    )


def storage_root() -> Path:
    """The one local folder hosted checkpoints are read from (a mount or a download of the
    platform's storage): ``PRIME_HOME/hosted-storage``."""
    from primenb.home import prime_home

    return prime_home() / "hosted-storage"


def _inside(path: Path, root: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
    except (OSError, ValueError):
        return False


__all__ = [
    "HostedControl",
    "fetch_checkpoint",
    "hosted_info",
    "mark_status",
    "metric_record",
    "public_info",
    "record_hosted_in_trace",
    "sample_record",
    "storage_root",
]
