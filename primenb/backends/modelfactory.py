"""The Model Factory backend: Prime Intellect's hosted training, through the real ``prime`` CLI.

``submit`` checks the hosted-only rules, quotes the GPU price, asks (unless ``yes``), and runs
``prime train run CONFIG -o json --yes`` on the config without its ``[primenb]`` table. The run
directory here is a mirror that `HostedControl.sync` keeps current from ``prime train get /
progress / metrics / rollouts / checkpoints / logs``, so `Run`, the monitor, the harness and the
sidebar read a hosted run like any other. The API key never passes through primenb: the CLI reads
it from the environment or its own login.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.backends.base import Backend, Lineage
from primenb.backends.primecli import (
    FORWARDED_SECRETS,
    PlatformRejected,
    PlatformUnreachable,
    PrimeCLI,
    PrimeCLIError,
    RunGone,
)
from primenb.backends.remote import read_remote, write_remote
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json, atomic_write_text
from primenb.protocol.rundir import (
    COMPLETED,
    FAILED,
    FINAL_STATES,
    QUEUED,
    RUNNING,
    STOPPED,
    RunDir,
    now_iso,
    record_run,
)
from primenb.run import Run

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.config.diagnostics import Report

DASHBOARD = "https://app.primeintellect.ai/dashboard/training/{run_id}"
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
LOG_COMPONENTS = ("orchestrator", "trainer")  # each is one CLI call at the end of a run


class HostedConfigError(PrimenbError):
    """A config the platform would reject; ``report`` locates each problem in the text."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


class LaunchCancelled(PrimenbError):
    pass


@dataclass
class Quote:
    """What a launch costs, from ``prime train models -o json`` (shown before a billable launch)."""

    gpu_type: str | None
    price_per_gpu_hour: float | None
    gpus: int
    team: str | None = None

    @property
    def per_hour(self) -> float | None:
        return None if self.price_per_gpu_hour is None else self.price_per_gpu_hour * self.gpus

    def text(self) -> str:
        gpu = self.gpu_type or "the platform's default GPU type"
        if self.price_per_gpu_hour is None:
            cost = "price unknown (no on-demand quote for this GPU type)"
        else:
            cost = f"${self.price_per_gpu_hour:.2f}/GPU-hour x {self.gpus} GPUs ≈ ${self.per_hour:.2f}/hour"
        who = f"team {self.team}" if self.team else "the account's default team (or personal account)"
        return (
            f"Launch a billable hosted run on {gpu}: {cost}, billed to {who}. Billing starts when the pods are ready."
        )


def gpu_count(config: Config) -> int:
    dep: Any = config.model.deployment
    if getattr(dep, "type", "") == "multi_node":
        nodes = int(getattr(dep, "num_train_nodes", 1) or 1) + int(getattr(dep, "num_infer_nodes", 0) or 0)
        return nodes * int(getattr(dep, "gpus_per_node", 8) or 8)
    return int(getattr(dep, "num_train_gpus", 1) or 1) + int(getattr(dep, "num_infer_gpus", 0) or 0)


class ModelFactoryBackend(Backend):
    name = "modelfactory"

    def __init__(
        self,
        *,
        gpu_type: str | None = None,
        volume: str | None = None,
        team: str | None = None,
        yes: bool = False,
        confirm: Callable[[Quote], bool] | None = None,
        cli: PrimeCLI | None = None,
        min_interval: float = 5.0,
    ) -> None:
        self.gpu_type = gpu_type
        self.volume = volume
        self.team = team
        self.yes = yes
        self.confirm = confirm
        self.cli = cli or PrimeCLI(team=team)
        if team and not self.cli.team:
            self.cli.team = team
        self.min_interval = min_interval

    # -- before a launch -----------------------------------------------------------------------
    def check(self, config: Config) -> Report:
        """The hosted-only rules, plus ``prime train validate`` where the CLI has it and uv is here."""
        from primenb.config.hosted import hosted_report

        report = hosted_report(config.text, config.mode, source=config.report.source, volume=self.volume)
        if report.ok:
            report.diagnostics += self._cli_validate(config)
        return report

    def _cli_validate(self, config: Config) -> list[Any]:
        import shutil

        from primenb.config.diagnostics import Diagnostic

        if shutil.which("uv") is None or not self.cli.has("train", "validate"):
            return []
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "config.toml"
            path.write_text(config.upstream_toml())
            proc = self.cli.run("train", "validate", str(path), *(["--sft"] if config.mode == "sft" else []))
        if proc.returncode == 0:
            return [Diagnostic("info", "hosted", "", "prime train validate: " + proc.stdout.strip().splitlines()[-1])]
        text = (proc.stdout + proc.stderr).strip()
        if "404" in text or "405" in text or "Not Found" in text:
            return []  # this platform has no local validation: it validates on submission
        lines = [ln for ln in text.splitlines() if ":" in ln and not ln.startswith(("Error", "Config validation"))]
        return [
            Diagnostic("error", "hosted", ln.split(":", 1)[0].strip(), ln.split(":", 1)[1].strip()) for ln in lines
        ] or [Diagnostic("error", "hosted", "", f"prime train validate: {text[-300:]}")]

    def quote(self, config: Config) -> Quote:
        data = self.cli.json("train", "models", "-o", "json")
        offers = data.get("on_demand") or data.get("onDemand") or []
        chosen = None
        for offer in offers:
            gpu = offer.get("gpu_type") or offer.get("gpuType")
            if (self.gpu_type and gpu == self.gpu_type) or (
                not self.gpu_type and chosen is None and offer.get("available_now", offer.get("availableNow"))
            ):
                chosen = offer
        price = None if chosen is None else chosen.get("price_per_gpu_hour", chosen.get("pricePerGpuHour"))
        gpu_type = self.gpu_type or (None if chosen is None else chosen.get("gpu_type") or chosen.get("gpuType"))
        return Quote(gpu_type, None if price is None else float(price), gpu_count(config), self.cli.team)

    # -- Backend -------------------------------------------------------------------------------
    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        return self.launch(config, self.prepare(config), name=name, lineage=lineage)

    def prepare(self, config: Config) -> Quote:
        """Everything before the billable step: CLI version, hosted rules, the quote, the question."""
        self.cli.require()
        report = self.check(config)
        if not report.ok:
            raise HostedConfigError(f"not launched: {report.summary()} for a hosted run", report)
        quote = self.quote(config)
        if not self.yes:
            if self.confirm is None:
                raise LaunchCancelled(f"{quote.text()}\nNot launched: confirm it, or pass --yes")
            if not self.confirm(quote):
                raise LaunchCancelled("not launched (cancelled at the confirmation)")
        return quote

    def launch(
        self,
        config: Config,
        quote: Quote,
        *,
        name: str | None = None,
        lineage: Lineage | None = None,
        resume_from: str | None = None,
    ) -> Run:
        """The billable step: ``prime train run`` (or ``--resume-from``); no question asked here."""
        from primenb.backends.local import prepare

        run_dir = prepare(config, name=name, lineage=lineage, backend=self.name).resolve()
        record_run(run_dir)
        (run_dir / "logs").mkdir(exist_ok=True)
        hosted_toml = run_dir / "configs" / "hosted.toml"
        atomic_write_text(hosted_toml, config.upstream_toml())  # without [primenb]
        args = ["train", "run", str(hosted_toml), "-o", "json", "--yes"]
        args += ["--gpu-type", self.gpu_type] if self.gpu_type else []
        args += ["--volume", self.volume] if self.volume else []
        args += ["--resume-from", resume_from] if resume_from else []
        return self._start(config, run_dir, args, quote, resumed_from=resume_from)

    def resume(self, run: Run, *, name: str | None = None) -> Run:
        """Continue a PAUSED hosted run (``prime train resume``): a new platform run, recorded here
        as a new run directory whose trace is a child of the paused run's."""
        import secrets as random

        from primenb.backends.local import prepare
        from primenb.config import load_config
        from primenb.protocol.record import read_trace

        info = read_remote(run.dir)
        if not info.get("run_id"):
            raise PrimenbError(f"{run.name} is not a hosted run: only hosted runs can be resumed")
        if run.refresh().get("platform_status") != "PAUSED":
            raise PrimenbError(
                f"{run.name} is {run.status.get('platform_status') or run.state}: only a PAUSED run resumes"
            )
        config = load_config(run.dir / "configs" / "config.toml")
        quote = Quote(info.get("gpu_type"), info.get("price_per_gpu_hour"), int(info.get("gpus") or 1), self.cli.team)
        if not self.yes and (self.confirm is None or not self.confirm(quote)):
            raise LaunchCancelled(f"{quote.text()}\nNot resumed: confirm it, or pass --yes")
        parent = (read_trace(run.dir) or {}).get("trace_id")
        child = prepare(
            config,
            name=name or f"{run.name}-resumed-{random.token_hex(2)}",
            lineage=Lineage(parent=parent),
            backend=self.name,
        ).resolve()
        record_run(child)
        (child / "logs").mkdir(exist_ok=True)
        args = ["train", "resume", str(info["run_id"]), "-o", "json", "--yes"]
        args += ["--gpu-type", self.gpu_type] if self.gpu_type else []
        return self._start(config, child, args, quote, resumed_from=str(info["run_id"]))

    def _start(self, config: Config, run_dir: Path, args: list[str], quote: Quote, *, resumed_from: str | None) -> Run:
        forwarded = [k for k in FORWARDED_SECRETS if self.cli._source().get(k)]
        for key in forwarded:
            args += ["-e", key]  # by name: the CLI reads the value from its environment
        try:
            # never retried: a 5xx after the platform created the run would launch (and bill) twice
            out = self.cli.json(*args, retry=False, secrets=forwarded)
        except PlatformRejected as exc:
            from primenb.config.hosted import platform_report

            report = platform_report(config.text, exc.errors, source=config.report.source)
            _mark(run_dir, FAILED, error=str(exc))
            raise HostedConfigError(
                f"not launched: the platform rejected the config ({report.summary()})", report
            ) from None
        except PrimeCLIError as exc:
            _mark(run_dir, FAILED, error=str(exc))
            raise
        created = out.get("run") or {}
        run_id = str(created.get("runId") or "")
        if not run_id:
            _mark(run_dir, FAILED, error=f"prime {args[1]} printed no run id: {json.dumps(out)[:200]}")
            raise PrimenbError(f"prime {args[1]} printed no run id ({json.dumps(out)[:200]})")
        info = {
            "backend": self.name,
            "run_id": run_id,
            "team": self.cli.team,
            "gpu_type": created.get("gpuType") or quote.gpu_type,
            "gpus": quote.gpus,
            "price_per_gpu_hour": created.get("pricePerGpuHour", quote.price_per_gpu_hour),
            "estimated_cost_per_hour": created.get("estimatedCostPerHour", quote.per_hour),
            "volume": self.volume,
            "resumed_from": resumed_from,
            "dashboard": DASHBOARD.format(run_id=run_id),
            "launched_at": now_iso(),
            "secrets_forwarded": forwarded,  # names only
        }
        write_remote(run_dir, info)
        _mark(run_dir, QUEUED, hosted=_public(info), note=f"launched as {run_id}: {info['dashboard']}")
        _trace_hosted(run_dir, info)
        return Run(run_dir, control=HostedControl(run_dir, self.cli, min_interval=self.min_interval))

    def open(self, run_dir: Path) -> Run:
        info = read_remote(run_dir)
        if not info.get("run_id"):
            return Run(run_dir)
        cli = PrimeCLI(team=info.get("team"))
        return Run(run_dir, control=HostedControl(Path(run_dir), cli, min_interval=self.min_interval))

    def fetch_artifacts(self, run: Run) -> Path:
        return fetch_checkpoint(run.dir, self.cli)


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
            _mark(self.files.root, FAILED, error=str(exc))
            self._complete_trace()
        except PrimeCLIError as exc:  # 401, 402, unreachable after retries, not JSON: say so, keep going
            self.last_error = str(exc)
            status = self.files.read_status()
            if status.get("state") not in FINAL_STATES:
                kind = "platform unreachable, retrying" if isinstance(exc, PlatformUnreachable) else str(exc)
                _mark(self.files.root, None, connection={"ok": False, "error": str(exc), "since": now_iso()}, note=kind)
        finally:
            self._lock.release()

    def alive(self) -> bool | None:
        return None  # the platform's status (mirrored into status.json) is the truth

    def request_stop(self, *, force: bool) -> None:
        self.cli.text("train", "stop", self.run_id, "--force")
        self.sync(force=True)

    # -- platform-only controls ------------------------------------------------------------
    def pause(self) -> str:
        self.cli.text("train", "pause", self.run_id, "--force", retry=False)
        self.sync(force=True)
        return str(self.files.read_status().get("platform_status") or "PAUSING")

    # -- the work ------------------------------------------------------------------------------
    def _retrying(self, message: str) -> None:
        status = self.files.read_status()
        if status.get("state") not in FINAL_STATES:
            _mark(self.files.root, None, connection={"ok": False, "error": message, "since": now_iso()}, note=message)

    def _final(self) -> bool:
        return self.files.read_status().get("state") in FINAL_STATES

    def _sync_once(self) -> None:
        info = read_remote(self.files.root)
        record = self.cli.json("train", "get", self.run_id, "-o", "json").get("run") or {}
        platform = str(record.get("status") or "").upper()
        state = STATES.get(platform, RUNNING)
        fields: dict[str, Any] = {
            "platform_status": platform,
            "connection": {"ok": True, "checked_at": now_iso()},
            "hosted": _public(info),
        }
        note = f"{platform.lower()} on the platform"
        fields["queue"] = None
        if platform in ("QUEUED", "PENDING"):
            ahead, reason = record.get("runs_ahead"), record.get("queue_reason")
            fields["queue"] = {"position": ahead, "reason": reason}
            note = (
                "queued" + (f": {ahead} run(s) ahead" if ahead is not None else "") + (f" ({reason})" if reason else "")
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
        if record.get("error_message"):
            fields["error"] = record["error_message"]
        if state in FINAL_STATES:
            fields["ended_at"] = now_iso()
            self._pull_logs()
            self._pull_checkpoints()
        _mark(self.files.root, state, note=note, **fields)
        if state in FINAL_STATES:
            self._complete_trace()

    def _pull_progress(self, fields: dict[str, Any]) -> None:
        progress = self.cli.json("train", "progress", self.run_id)
        latest = progress.get("latest_step")
        rows = read_jsonl_steps(self.files.metrics_path)
        last = max(rows, default=0)
        if isinstance(latest, int) and latest > last:
            got = self.cli.json("train", "metrics", self.run_id, "--min-step", str(last + 1)).get("metrics") or []
            new = [r for r in map(metric_record, got) if r is not None and r["step"] > last]
            _append(self.files.metrics_path, sorted(new, key=lambda r: r["step"]))
        if isinstance(latest, int):
            fields["step"] = latest
        seen = read_jsonl_steps(self.files.samples_path)
        with_samples = [s for s in progress.get("steps_with_samples") or [] if isinstance(s, int) and s not in seen]
        for step in with_samples[-1:]:  # the newest: older ones stay one `prime train rollouts` away
            got = self.cli.json("train", "rollouts", self.run_id, "--step", str(step), "--num", "8")
            _append(self.files.samples_path, [sample_record(s, step) for s in got.get("samples") or []])

    def _pull_logs(self) -> None:
        parts = []
        for component in LOG_COMPONENTS:
            try:
                text = self.cli.text("train", "logs", self.run_id, "-c", component, "--raw", "-n", "500", retry=False)
            except PrimeCLIError as exc:
                text = f"(no {component} logs: {exc})"
            atomic_write_text(self.files.root / "logs" / f"{component}.log", text)
            parts.append(f"==> {component} <==\n{text.rstrip()}\n")
        atomic_write_text(self.files.log_path, "\n".join(parts))

    def _pull_checkpoints(self) -> None:
        data = self.cli.json("train", "checkpoints", self.run_id, "-o", "json")
        atomic_write_json(self.files.root / "hosted_checkpoints.json", data)

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
    becomes ``reward`` and ``loss/mean`` ``loss``, the names the monitor looks for first."""
    from primenb.protocol.rundir import finite_numbers

    if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
        return None
    nested = rec.get("metrics")
    values: dict[str, Any] = nested if isinstance(nested, dict) else rec
    row: dict[str, Any] = {"step": rec["step"], **finite_numbers({k: v for k, v in values.items() if k != "step"})}
    for short in ("reward", "loss"):
        if short not in row and f"{short}/mean" in row:
            row[short] = row[f"{short}/mean"]
    return row


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


def _cost(record: dict[str, Any], info: dict[str, Any]) -> dict[str, Any] | None:
    price, gpus = info.get("price_per_gpu_hour"), int(info.get("gpus") or 1)
    started = _when(record.get("started_at"))
    if price is None or started is None:
        return None
    ended = _when(record.get("completed_at")) or datetime.now(started.tzinfo)
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


def _public(info: dict[str, Any]) -> dict[str, Any]:
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


def _mark(run_dir: Path, state: str | None, **fields: Any) -> None:
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


def _trace_hosted(run_dir: Path, info: dict[str, Any]) -> None:
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import read_trace, write_trace

    doc = read_trace(run_dir)
    if doc is None:
        return
    doc["hosted"] = _public(info)
    write_trace(run_dir, doc)
    index_trace(doc, run_dir)


# -- checkpoints -----------------------------------------------------------------------------


def fetch_checkpoint(run_dir: Path, cli: PrimeCLI | None = None) -> Path:
    """The latest READY checkpoint of a hosted run, copied to ``checkpoints/step_N`` here; a
    `PrimenbError` saying exactly why when it cannot be (none ready, storage out of reach)."""
    import shutil
    from urllib.parse import unquote, urlsplit

    info = read_remote(run_dir)
    if not info.get("run_id"):
        raise PrimenbError(f"{run_dir} is not a hosted run (no {run_dir / 'remote.json'})")
    cli = cli or PrimeCLI(team=info.get("team"))
    data = cli.json("train", "checkpoints", str(info["run_id"]), "-o", "json")
    ready = [c for c in data.get("checkpoints") or [] if str(c.get("status")).upper() == "READY"]
    if not ready:
        states = (
            ", ".join(f"step {c.get('step')}: {c.get('status')}" for c in data.get("checkpoints") or []) or "none yet"
        )
        raise PrimenbError(
            f"hosted run {info['run_id']} has no READY checkpoint ({states}); try again once one is READY"
        )
    best = max(ready, key=lambda c: int(c.get("step") or 0))
    url = str(best.get("storage_url") or best.get("storageUrl") or "")
    target = RunDir(run_dir).checkpoint_dir(int(best.get("step") or 0))
    parts = urlsplit(url)
    if parts.scheme in ("file", "") and Path(unquote(parts.path)).is_dir():
        if not target.exists():
            shutil.copytree(Path(unquote(parts.path)), target)
        status = RunDir(run_dir).read_status()
        atomic_write_json(RunDir(run_dir).status_path, {**status, "final_checkpoint": str(target)})
        return target
    raise PrimenbError(
        f"hosted run {info['run_id']}: checkpoint step {best.get('step')} is READY at {url}, but primenb cannot "
        f"read the platform's storage from here (no {parts.scheme or 'storage'} access); download it to {target} "
        "with the platform's tools, then load that folder"
    )


def find_hosted(run_id: str) -> Path | None:
    """The local mirror of the hosted run ``run_id`` (newest launch first), from the run index."""
    from primenb.home import prime_home
    from primenb.protocol.rundir import RUN_INDEX

    index = prime_home() / RUN_INDEX
    if not run_id or not index.exists():
        return None
    for line in reversed(index.read_text().splitlines()):
        path = Path(line)
        if path.is_dir() and read_remote(path).get("run_id") == run_id:
            return path
    return None


def continuation(backend: ModelFactoryBackend, parent_dir: Path, config: Config, *, name: str, parent_id: str) -> Run:
    """``%prime_harness apply`` on a hosted trace: ``prime train run --resume-from`` its PAUSED
    platform run with ``config``; the new trace's parent is ``parent_id``."""
    info = read_remote(parent_dir)
    if not info.get("run_id"):
        raise PrimenbError(f"{parent_dir} is not a hosted run (no {parent_dir / 'remote.json'})")
    status = backend.open(parent_dir).refresh()
    platform = status.get("platform_status") or str(status.get("state", "")).upper()
    if platform != "PAUSED":
        raise PrimenbError(
            f"hosted run {info['run_id']} is {platform}: the platform continues only a PAUSED run (pause it while "
            "it runs with %prime_train --pause NAME); to train the config again use %prime_harness rerun"
        )
    quote = backend.prepare(config)
    return backend.launch(config, quote, name=name, lineage=Lineage(parent=parent_id), resume_from=str(info["run_id"]))


def quote_as_dict(quote: Quote) -> dict[str, Any]:
    return {**asdict(quote), "per_hour": quote.per_hour}


@dataclass
class Account:
    """Who pays for a hosted run: ``prime config view --plain`` (key masked) and the teams."""

    config_view: str
    teams: list[dict[str, Any]]
    team: str | None

    def __repr__(self) -> str:
        rows = [f"  {t.get('teamId')}  {t.get('name')} ({t.get('role')})" for t in self.teams] or ["  (no teams)"]
        chosen = self.team or "the CLI's configured team (or the personal account)"
        return "\n".join([self.config_view.rstrip(), "", "Teams:", *rows, "", f"A hosted run is billed to: {chosen}"])

    def _repr_html_(self) -> str:
        import html

        return f"<pre>{html.escape(repr(self))}</pre>"


def account(cli: PrimeCLI | None = None) -> Account:
    """`%prime_backend show modelfactory`: the account and team a launch would bill."""
    import os

    cli = cli or PrimeCLI()
    cli.require()
    view = cli.text("config", "view", "--plain")
    teams = cli.json("teams", "list", "-o", "json").get("teams") or []
    return Account(view, [t for t in teams if isinstance(t, dict)], cli.team or os.environ.get("PRIME_TEAM_ID"))


__all__ = [
    "HostedConfigError",
    "HostedControl",
    "LaunchCancelled",
    "ModelFactoryBackend",
    "Quote",
    "account",
    "continuation",
    "fetch_checkpoint",
    "find_hosted",
    "metric_record",
    "sample_record",
]
