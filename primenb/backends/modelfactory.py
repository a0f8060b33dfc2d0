"""The Model Factory backend: Prime Intellect's hosted training, through the real ``prime`` CLI.

``submit`` checks the hosted-only rules, quotes the GPU price, asks (unless ``yes``), and runs
``prime train run CONFIG -o json --yes`` on the config without its ``[primenb]`` table. The run
directory here is a mirror that `HostedControl.sync` keeps current from ``prime train get /
progress / metrics / rollouts / checkpoints / logs``, so `Run`, the monitor, the harness and the
sidebar read a hosted run like any other. The API key never passes through primenb: the CLI reads
it from the environment or its own login.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.backends import answers
from primenb.backends.base import Backend, Capabilities, Lineage
from primenb.backends.hosted_mirror import (
    HostedControl,
    fetch_checkpoint,
    hosted_info,
    mark_status,
    metric_record,
    public_info,
    record_hosted_in_trace,
    sample_record,
)
from primenb.backends.hosted_rules import hosted_report, platform_report
from primenb.backends.primecli import (
    FORWARDED_SECRETS,
    NotJSON,
    PlatformRejected,
    PrimeCLI,
    PrimeCLIError,
)
from primenb.backends.remote import read_remote, write_remote
from primenb.config.backend_rules import BackendRules
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_text
from primenb.protocol.privacy import denies
from primenb.protocol.rundir import (
    FAILED,
    QUEUED,
    RunDir,
    now_iso,
    record_run,
)
from primenb.run import Run

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.config.diagnostics import Report

DASHBOARD = "https://app.primeintellect.ai/dashboard/training/{run_id}"


class HostedConfigError(PrimenbError):
    """A config the platform would reject; ``report`` locates each problem in the text."""

    def __init__(self, message: str, report: Report) -> None:
        super().__init__(message)
        self.report = report


class LaunchCancelled(PrimenbError):
    pass


DENY_HOSTED = (
    'data_collection = "deny": the platform trains on your data set and sees every prompt and completion; '
    "primenb keeps none of that text here (samples are hashed, platform logs are not copied)"
)


@dataclass
class Quote:
    """What a launch costs, from ``prime train models -o json`` (shown before a billable launch)."""

    gpu_type: str | None
    price_per_gpu_hour: float | None
    gpus: int
    team: str | None = None
    deny: bool = False  # the config says data_collection = "deny"

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
        text = f"Launch a billable hosted run on {gpu}: {cost}, billed to {who}. "
        text += "Billing starts when the pods are ready."
        if self.deny:
            text += f"\n{DENY_HOSTED}"
        return text


def _denies(config: Config) -> bool:
    return denies(getattr(getattr(config.model, "primenb", None), "privacy", None))


def gpu_count(config: Config) -> int:
    dep: Any = config.model.deployment
    if getattr(dep, "type", "") == "multi_node":
        nodes = int(getattr(dep, "num_train_nodes", 1) or 1) + int(getattr(dep, "num_infer_nodes", 0) or 0)
        return nodes * int(getattr(dep, "gpus_per_node", 8) or 8)
    return int(getattr(dep, "num_train_gpus", 1) or 1) + int(getattr(dep, "num_infer_gpus", 0) or 0)


class ModelFactoryBackend(Backend):
    name = "modelfactory"
    capabilities = Capabilities(
        bills=True,
        options=("gpu_type", "volume", "team", "yes"),
        resume="platform",
        pausable=True,
        fetches_checkpoints=True,
        describes_account=True,
    )
    config_rules = BackendRules(platform=hosted_report)  # the platform's rules show in the cell

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
            # builds a cached venv with uv on first use: minutes, not seconds
            sft = ["--sft"] if config.mode == "sft" else []
            proc = self.cli.run("train", "validate", str(path), *sft, timeout=600)
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
        offers = answers.offers(self.cli.json("train", "models", "-o", "json"))
        chosen = None
        for offer in offers:
            if (self.gpu_type and offer.gpu_type == self.gpu_type) or (
                not self.gpu_type and chosen is None and offer.available_now
            ):
                chosen = offer
        price = None if chosen is None else chosen.price_per_gpu_hour
        gpu_type = self.gpu_type or (None if chosen is None else chosen.gpu_type)
        price = None if price is None else float(price)
        return Quote(gpu_type, price, gpu_count(config), self.cli.team, deny=_denies(config))

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
        RunDir(run_dir).logs.mkdir(exist_ok=True)
        hosted_toml = RunDir(run_dir).config_file("hosted.toml")
        atomic_write_text(hosted_toml, config.upstream_toml())  # without [primenb]
        args = ["train", "run", "-o", "json", "--yes"]
        args += ["--gpu-type", self.gpu_type] if self.gpu_type else []
        args += ["--volume", self.volume] if self.volume else []
        if resume_from:
            resume_from = answers.run_id(resume_from, "train run --resume-from")
            args += ["--resume-from", resume_from]
        return self._start(config, run_dir, [*args, "--", str(hosted_toml)], quote, resumed_from=resume_from)

    def resume(self, run: Run, *, name: str | None = None) -> Run:
        """Continue a PAUSED hosted run (``prime train resume``): a new platform run, recorded here
        as a new run directory whose trace is a child of the paused run's."""
        import secrets as random

        from primenb.backends.local import prepare
        from primenb.config import load_config
        from primenb.protocol.record import read_trace

        info = hosted_info(run.dir)  # a message if it is not a hosted run
        if run.refresh().get("platform_status") != "PAUSED":
            raise PrimenbError(
                f"{run.name} is {run.status.get('platform_status') or run.state}: only a PAUSED run resumes"
            )
        config = load_config(run.files.config_toml)
        quote = Quote(
            info.get("gpu_type"),
            info.get("price_per_gpu_hour"),
            int(info.get("gpus") or 1),
            self.cli.team,
            deny=_denies(config),
        )
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
        RunDir(child).logs.mkdir(exist_ok=True)
        rid = answers.run_id(info["run_id"], "train resume")
        args = ["train", "resume", "-o", "json", "--yes"]
        args += ["--gpu-type", self.gpu_type] if self.gpu_type else []
        return self._start(config, child, [*args, "--", rid], quote, resumed_from=rid)

    def _start(self, config: Config, run_dir: Path, args: list[str], quote: Quote, *, resumed_from: str | None) -> Run:
        forwarded = [k for k in FORWARDED_SECRETS if self.cli._source().get(k)]
        tail = args[args.index("--") :] if "--" in args else []
        args = args[: len(args) - len(tail)]
        for key in forwarded:
            args += ["-e", key]  # by name: the CLI reads the value from its environment
        args += tail
        try:
            # never retried: a 5xx after the platform created the run would launch (and bill) twice
            out = self.cli.json(*args, retry=False, secrets=forwarded)
        except PlatformRejected as exc:
            report = platform_report(config.text, exc.errors, source=config.report.source)
            mark_status(run_dir, FAILED, error=str(exc))
            raise HostedConfigError(
                f"not launched: the platform rejected the config ({report.summary()})", report
            ) from None
        except NotJSON as exc:  # the platform may have created (and bills) the run: say where to look
            message = (
                f"{exc}. The run may have started on the platform: look for it with `prime train list` "
                "(or the dashboard) before launching again"
            )
            mark_status(run_dir, FAILED, error=message)
            raise NotJSON(message) from None
        except PrimeCLIError as exc:
            mark_status(run_dir, FAILED, error=str(exc))
            raise
        created = answers.launched(out, f"train {args[1]}")
        run_id = created.run_id
        if not run_id:
            shown = json.dumps(out, default=str)[:200]
            message = (
                f"prime train {args[1]} printed no run id ({shown}); the run may have started: "
                "look for it with `prime train list` (or the dashboard) before launching again"
            )
            mark_status(run_dir, FAILED, error=message)
            raise PrimenbError(message)
        # the billable run exists: its id is on disk before anything else can fail
        write_remote(run_dir, {"backend": self.name, "run_id": run_id, "team": self.cli.team})
        info = {
            "backend": self.name,
            "run_id": run_id,
            "team": self.cli.team,
            "gpu_type": created.gpu_type or quote.gpu_type,
            "gpus": quote.gpus,
            "price_per_gpu_hour": created.price_per_gpu_hour
            if created.price_per_gpu_hour is not None
            else quote.price_per_gpu_hour,
            "estimated_cost_per_hour": created.estimated_cost_per_hour
            if created.estimated_cost_per_hour is not None
            else quote.per_hour,
            "volume": self.volume,
            "resumed_from": resumed_from,
            "dashboard": DASHBOARD.format(run_id=run_id),
            "launched_at": now_iso(),
            "secrets_forwarded": forwarded,  # names only
        }
        write_remote(run_dir, info)
        note = f"launched as {run_id}: {info['dashboard']}"
        if _denies(config):
            note += f"\n{DENY_HOSTED}"
        mark_status(run_dir, QUEUED, hosted=public_info(info), note=note)
        record_hosted_in_trace(run_dir, info)
        return Run(run_dir, control=HostedControl(run_dir, self.cli, min_interval=self.min_interval))

    def open(self, run_dir: Path) -> Run:
        info = read_remote(run_dir)
        if not info.get("run_id"):
            return Run(run_dir)
        cli = PrimeCLI(team=info.get("team"))
        return Run(run_dir, control=HostedControl(Path(run_dir), cli, min_interval=self.min_interval))

    def fetch_artifacts(self, run: Run) -> Path:
        return fetch_checkpoint(run.dir, self.cli)

    # -- the capabilities declared above -------------------------------------------------------
    def pause(self, run: Run) -> str:
        control = getattr(run, "_control", None)
        if not isinstance(control, HostedControl):
            raise PrimenbError(f"{run.name} is not a hosted run: --pause and --resume are for hosted runs")
        return control.pause()

    def resume_quote(self, run: Run) -> Quote:
        info = read_remote(run.dir)
        return Quote(info.get("gpu_type"), info.get("price_per_gpu_hour"), int(info.get("gpus") or 1), self.cli.team)

    def continue_trace(self, parent_dir: Path, config: Config, *, name: str, parent_id: str) -> Run:
        return continuation(self, parent_dir, config, name=name, parent_id=parent_id)

    def fetch_checkpoint(self, run_dir: Path) -> Path:
        return fetch_checkpoint(run_dir)  # with the team recorded for the run

    def account(self) -> Account:
        return account()


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
    info = hosted_info(parent_dir)
    status = backend.open(parent_dir).refresh()
    platform = status.get("platform_status") or str(status.get("state", "")).upper()
    if platform != "PAUSED":
        raise PrimenbError(
            f"hosted run {info['run_id']} is {platform}: the platform continues only a PAUSED run (pause it while "
            "it runs with %prime_train --pause NAME); to train the config again use %prime_harness rerun"
        )
    quote = backend.prepare(config)
    return backend.launch(config, quote, name=name, lineage=Lineage(parent=parent_id), resume_from=str(info["run_id"]))


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
    teams = answers.teams(cli.json("teams", "list", "-o", "json"))
    return Account(view, teams, cli.team or os.environ.get("PRIME_TEAM_ID"))


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
