"""One small adapter per tracker over that tracker's own client, and a fan-out that never raises."""

from __future__ import annotations

import abc
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primenb.protocol.privacy import error_text

log = logging.getLogger("primenb.trackers")

ENDINGS = ("completed", "stopped", "failed")  # a run's final state (status.json), as each tracker is told it
MLFLOW_STATUS = {"completed": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
# W&B: 0 is finished, anything else failed (a client cannot set "killed"); 130 is the shell's code
# for an interrupted program, and the summary's `primenb/state` says "stopped" in words
WANDB_EXIT_CODE = {"completed": 0, "stopped": 130, "failed": 1}
# the folder of the shared trackio and MLflow stores, set by the local backend for its engine
STORE_VAR = "PRIMENB_TRACKER_STORE"
MLFLOW_BATCH = 100  # MLflow's limit of params per log_batch request (what TRL sends at once too)


class AlreadyHeld(Exception):
    """Export: the tracker already holds this trace's run (from live reporting or an earlier export)."""


@dataclass
class TrackerSettings:
    """What the sinks need to know about a run: nothing here is a secret (the config is redacted
    by the caller with the same scan as traces)."""

    root: Path  # the tracker folder inside the run directory (offline files, event files)
    name: str  # the run's name in the tracker
    trace_id: str = ""
    trace_path: str = ""  # the link back: the trace's run directory
    config: dict[str, Any] = field(default_factory=dict)
    wandb: dict[str, Any] | None = None  # [monitors.wandb]: project, entity, name, group, tags, offline
    project: str = "primenb"  # trackio's and MLflow's project / experiment
    export: bool = False  # an export: refuse (AlreadyHeld) when the tracker holds this trace's run already
    # [primenb.privacy] record_hostname: false keeps the machine's name out of the trackers too (W&B's
    # host and system metadata and stats, the TensorBoard event file's name)
    record_hostname: bool = True
    # where trackio's and MLflow's default stores go: one folder shared by the runs of a PRIME_HOME
    # (a local run, an export: the runs compare in those tools), or None: inside the run's own
    # tracker folder (a remote run, whose run directory is what comes back)
    store: Path | None = None

    @property
    def stores(self) -> Path:
        return self.store if self.store is not None else self.root


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a metrics row, without its bookkeeping fields (step, time, phase)."""
    skip = {"step", "time", "phase", "nonfinite"}
    return {
        k: float(v) for k, v in row.items() if k not in skip and isinstance(v, int | float) and not isinstance(v, bool)
    }


class Sink(abc.ABC):
    kind = ""
    note = ""  # a warning from a sink that started all the same (W&B offline instead of online)

    @abc.abstractmethod
    def log(self, step: int, values: dict[str, float]) -> None:
        """One metrics row's scalars at ``step``."""

    def finish(self, summary: dict[str, float], state: str, step: int) -> None:  # noqa: B027 - optional
        """Close the run as ``state`` (one of ENDINGS); ``summary`` is the final eval, logged as
        ``final/...`` at ``step`` (the last step logged)."""

    def location(self) -> dict[str, str]:
        """Where this tracker run lives: url, folder, run id (recorded in the trace)."""
        return {}


class TensorBoardSink(Sink):
    """Event files written with tensorboard's own writer (no torch: export runs outside the engine)."""

    kind = "tensorboard"

    def __init__(self, s: TrackerSettings) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.folder = s.root / "tensorboard"
        old = sorted(self.folder.glob("events.out.tfevents.*")) if s.export else []
        if old:  # a second event file in the folder would make TensorBoard read every point twice
            raise AlreadyHeld(
                f"{self.folder} holds this run's event files already ({old[0].name}); exporting again would "
                f"show every point twice: remove those files first to export anew"
            )
        self.writer = EventFileWriter(str(self.folder))
        self.record_hostname = s.record_hostname
        self._text("primenb/trace", f"{s.trace_id} {s.trace_path}")
        self._text("primenb/config", _config_text(s.config))

    def _event(self, step: int, summary: Any) -> None:
        import time

        from tensorboard.compat.proto.event_pb2 import Event

        self.writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    def _text(self, tag: str, text: str, step: int = 0) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._event(step, text_pb(tag, text))

    def log(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event(step, Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]))

    def finish(self, summary: dict[str, float], state: str, step: int) -> None:
        if summary:
            self.log(step, {"final/" + k: v for k, v in summary.items()})
        # TensorBoard has no run state: a text summary says it (the Text tab, tag primenb/state)
        self._text("primenb/state", state, step)
        self.writer.close()
        if not self.record_hostname:  # tensorboard names the file events.out.tfevents.TIME.HOST.PID.N
            path = Path(self.writer._file_name)
            parts = path.name.split(".")
            if len(parts) >= 7:
                path.rename(path.with_name(".".join([*parts[:4], "host", *parts[-2:]])))

    def location(self) -> dict[str, str]:
        return {"folder": str(self.folder)}


class MlflowSink(Sink):
    kind = "mlflow"

    def __init__(self, s: TrackerSettings) -> None:
        from mlflow.tracking import MlflowClient

        # MLFLOW_TRACKING_URI wins; otherwise a file store inside the run directory (never the network)
        uri = os.environ.get("MLFLOW_TRACKING_URI") or ""
        if not uri:
            uri = (s.stores / "mlflow").resolve().as_uri()
        if uri.startswith("file:") or "://" not in uri:
            # mlflow-skinny has no SQL store (no sqlalchemy); MLflow 3 keeps the file store behind
            # this documented opt-out. `mlflow migrate-filestore` moves it to a database later.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        if uri.startswith(("http:", "https:")):
            # MLflow retries a request 7 times for up to 120 s each: an unreachable server held a
            # run for 248 s before the first step. One retry, 10 s (the user's own settings win).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        from mlflow.entities import Param

        self.client = MlflowClient(tracking_uri=uri)
        # MLflow's own variable names the experiment, as it does for mlflow.start_run (TRL too)
        name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or s.project
        exp_id = self._experiment(name)
        if s.export and s.trace_id:
            self._refuse_a_second_copy(exp_id, s.trace_id, uri)
        tags = {"primenb.trace_id": s.trace_id, "primenb.trace": s.trace_path}
        self.run_id = self.client.create_run(exp_id, run_name=s.name, tags=tags).info.run_id
        if not (isinstance(exp_id, str) and exp_id and isinstance(self.run_id, str) and self.run_id):
            # any HTTP service answering 200 {} gets this far: MLflow's client takes the empty answers
            raise RuntimeError(f"{uri} does not answer as an MLflow tracking server (no experiment or run id)")
        self.uri = uri
        # the file store makes "a/b" a file under folder "a": a key that is also another key's
        # prefix ("reward_errors", "reward_errors/lcs") cannot be stored, so there "/" becomes "."
        self.key = (lambda k: k.replace("/", ".")) if uri.startswith("file:") else (lambda k: k)
        # one request per 100 params, not one each: 204 params took 17.7 s before the first step
        # against a server answering in 50 ms
        params = [Param(k[:250], str(v)[:6000]) for k, v in _flat(s.config).items()]
        for i in range(0, len(params), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, params=params[i : i + MLFLOW_BATCH])

    def _experiment(self, name: str) -> Any:
        """The experiment's id as the server gives it (checked by the caller: any HTTP service
        answering ``200 {}`` gets an empty one)."""
        exp = self.client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        try:
            return self.client.create_experiment(name)
        except Exception:
            # two runs sharing a store started together: the other one made it first
            exp = self.client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id

    def _refuse_a_second_copy(self, exp_id: str, trace_id: str, uri: str) -> None:
        """A run tagged with this trace (live reporting or an earlier export), not deleted."""
        found = self.client.search_runs(
            [exp_id], filter_string=f"tags.`primenb.trace_id` = '{trace_id}'", max_results=1
        )
        if found:
            run_id = found[0].info.run_id
            raise AlreadyHeld(
                f"MLflow run {run_id} in {uri} holds this trace's run already; exporting again would make a "
                f"second run with every point: delete it first (`mlflow runs delete --run-id {run_id}`) "
                f"to export anew"
            )

    def log(self, step: int, values: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(self.key(k), v, now, step) for k, v in values.items()])

    def finish(self, summary: dict[str, float], state: str, step: int) -> None:
        if summary:
            self.log(step, {"final/" + k: v for k, v in summary.items()})
        self.client.set_terminated(self.run_id, status=MLFLOW_STATUS[state])

    def location(self) -> dict[str, str]:
        return {"uri": self.uri, "run_id": self.run_id}


TRACKIO_TRACE_KEY = "primenb.trace_id"


class TrackioSink(Sink):
    kind = "trackio"

    def __init__(self, s: TrackerSettings) -> None:
        # trackio keeps its store under TRACKIO_DIR; default it into the shared store, or the run directory
        os.environ.setdefault("TRACKIO_DIR", str((s.stores / "trackio").resolve()))
        self.folder = os.environ["TRACKIO_DIR"]
        # trackio starts on a folder it cannot write and only warns, from its own thread, that
        # nothing was stored: make the folder first, so that failure is this sink's warning
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        import trackio

        self.trackio = trackio
        # trackio binds its folder at its first import in a process: report the one it uses
        self.folder = str(getattr(sys.modules.get("trackio.utils"), "TRACKIO_DIR", self.folder))
        self.project = s.project
        if s.export:
            self._refuse_a_second_copy(s)
        config = {**_flat(s.config), TRACKIO_TRACE_KEY: s.trace_id}  # how an export finds this run again
        self.run = trackio.init(project=s.project, name=s.name, config=config, resume="never")

    def _refuse_a_second_copy(self, s: TrackerSettings) -> None:
        """A run of this trace in the project: by the trace id in its config, or (a run reported
        before primenb recorded it there) by name."""
        from trackio.api import Runs

        for run in Runs(self.project):
            config = run.config or {}
            held = config.get(TRACKIO_TRACE_KEY) == s.trace_id if TRACKIO_TRACE_KEY in config else run.name == s.name
            if held:
                raise AlreadyHeld(
                    f"trackio run {run.name!r} in project {self.project!r} ({self.folder}) holds this trace's run "
                    f"already; exporting again would make a second run with every point: delete it first "
                    f"(trackio's dashboard, or trackio.Api().runs(...)[i].delete()) to export anew"
                )

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def finish(self, summary: dict[str, float], state: str, step: int) -> None:
        if summary:
            self.log(step, {"final/" + k: v for k, v in summary.items()})
        if state != "completed":  # trackio has no run state: an alert (its dashboard lists them) says it
            from trackio import AlertLevel

            level = AlertLevel.ERROR if state == "failed" else AlertLevel.WARN
            self.run.alert(f"primenb run {state}", f"the run ended {state} at step {step}", level=level, step=step)
        self.run.finish()

    def location(self) -> dict[str, str]:
        name = str(getattr(self.run, "name", ""))
        return {
            "folder": self.folder,
            "project": self.project,
            "name": name,
            "run_id": str(getattr(self.run, "id", name)),
        }


class WandbSink(Sink):
    kind = "wandb"

    def __init__(self, s: TrackerSettings) -> None:
        import wandb

        w = dict(s.wandb or {})
        # online only with a key in the environment (never in the config); otherwise offline files
        online = (
            bool(os.environ.get("WANDB_API_KEY")) and not w.get("offline") and os.environ.get("WANDB_MODE") != "offline"
        )
        folder = s.root / "wandb"
        old = sorted(folder.glob("*run-*")) if s.export else []
        if old:  # every run W&B starts here (online or offline) leaves its folder: a second would duplicate
            raise AlreadyHeld(
                f"W&B run files for this run are in {old[0]} already (live reporting or an earlier export); "
                f"exporting again would make a second W&B run with every point: remove that folder (and the "
                f"run in W&B, if it was synced) to export anew"
            )
        folder.mkdir(parents=True, exist_ok=True)
        init: dict[str, Any] = dict(
            # [monitors.wandb] first, then W&B's own variables (as wandb.init and TRL read them)
            project=w.get("project") or os.environ.get("WANDB_PROJECT") or s.project,
            entity=w.get("entity") or os.environ.get("WANDB_ENTITY") or None,
            name=w.get("name") or s.name,
            group=w.get("group"),
            tags=w.get("tags"),
            config=s.config,
            notes=f"primenb trace {s.trace_id}: {s.trace_path}",
            dir=str(s.root),
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off", init_timeout=30, **_wandb_host(s.record_hostname)),
        )
        unreachable = _unreachable(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai") if online else ""
        if unreachable:
            # straight to offline: an online start that cannot connect waits its 30 s, and the
            # offline run started after it in the same W&B service then lost its history under
            # load (wandb/wandb#9865: offline after a failed online init stalls)
            self.note = f"tracker wandb: {unreachable}; logging offline instead"
            online = False
        try:
            self.run = wandb.init(mode="online" if online else "offline", **init)
        except Exception as exc:
            if not online:
                raise
            # W&B unreachable (or the key refused): the run still goes to W&B, as offline files
            # to `wandb sync` later, and the monitor says so
            self.note = f"tracker wandb: online start failed ({_why(exc)}); logging offline instead"
            self.run = wandb.init(mode="offline", **init)
        # the run's own step is the x axis (a continuation starts past 0, the warm-up keys differ)
        self.run.define_metric("primenb/step")
        self.run.define_metric("*", step_metric="primenb/step")

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log({**values, "primenb/step": step})

    def finish(self, summary: dict[str, float], state: str, step: int) -> None:
        for k, v in summary.items():
            self.run.summary["final/" + k] = v
        self.run.summary["primenb/state"] = state
        self.run.finish(exit_code=WANDB_EXIT_CODE[state])
        # finish() returns before W&B's service has written the run's transaction log: read then,
        # the offline run-ID.wandb held its 7-byte header only (4 of 8 tries here; the flaky
        # test_wandb_unreachable_logs_offline_with_a_warning). Shutting the service down writes
        # it; the W&B runs of this process (the engine's, an export's child) are primenb's only.
        import wandb

        wandb.teardown()

    def location(self) -> dict[str, str]:
        # the run's own folder (offline-run-...), the one `wandb sync` takes, not its files/ folder
        out = {"folder": str(Path(self.run.dir).parent), "run_id": str(self.run.id)}
        if self.run.url:
            out["url"] = str(self.run.url)
        return out


class Fanout:
    """The open sinks. A sink that raises is closed and dropped; its error is kept in ``warnings``
    (and in ``failed``, by tracker) and passed to ``on_warning`` (the engine puts them in
    status.json, which the monitor and a terminal following the run show) and the run goes on."""

    def __init__(self, sinks: list[Sink], warnings: list[str], failed: dict[str, str] | None = None) -> None:
        self.sinks = sinks
        self.warnings = warnings
        self.failed = dict(failed or {})  # tracker -> why it is off (the trace's trackers column says it)
        self.last_step = 0
        self.on_warning: Callable[[list[str]], None] | None = None

    def warn(self, msg: str, kind: str = "") -> None:
        log.warning("%s", msg)
        self.warnings.append(msg)
        if kind:
            self.failed.setdefault(kind, msg)
        if self.on_warning is not None:
            try:
                self.on_warning(list(self.warnings))
            except Exception:  # reporting a warning never becomes a second failure
                log.debug("on_warning failed", exc_info=True)

    def _guard(self, sink: Sink, what: str, fn: Callable[..., object], *args: object) -> bool:
        try:
            fn(*args)
            return True
        except Exception as exc:  # a tracker never stops training
            self.warn(f"tracker {sink.kind}: {what} failed ({_why(exc)}); it is off for this run", sink.kind)
            return False

    def log_row(self, row: Mapping[str, Any]) -> None:
        values = scalars(row)
        step = row.get("step")
        if not values or not isinstance(step, int):
            return
        self.last_step = max(self.last_step, step)
        self.sinks = [s for s in self.sinks if self._guard(s, "log", s.log, step, values)]

    def finish(self, summary: Mapping[str, Any], state: str = "completed") -> dict[str, dict[str, str]]:
        """Close every sink, telling each how the run ended (``state``: completed, stopped,
        failed); returns where each run lives (for the trace), and why a tracker that failed is off."""
        if state not in ENDINGS:
            raise ValueError(f"state {state!r} is not one of {', '.join(ENDINGS)}")
        final = scalars(summary)
        where: dict[str, dict[str, str]] = {}
        for s in self.sinks:
            where[s.kind] = {}
            self._guard(s, "location", lambda sink, out: out.update(sink.location()), s, where[s.kind])
            self._guard(s, "finish", s.finish, final, state, self.last_step)
        for kind, why in self.failed.items():
            where.setdefault(kind, {})["warning"] = why
        self.sinks = []
        return where


def records_hostname(config: Mapping[str, Any] | None) -> bool:
    """``[primenb.privacy] record_hostname`` of a run's config (true unless set false), as its trace reads it."""
    primenb = (config or {}).get("primenb")
    privacy = primenb.get("privacy") if isinstance(primenb, Mapping) else None
    return not (isinstance(privacy, Mapping) and privacy.get("record_hostname") is False)


def _wandb_host(record: bool) -> dict[str, Any]:
    """W&B settings that keep the machine's name out (its run record's host, system metadata and
    stats sampling); none when the hostname may be recorded."""
    if record:
        return {}
    return {"host": "unrecorded", "x_disable_meta": True, "x_disable_stats": True, "x_disable_machine_info": True}


def _unreachable(url: str, timeout: float = 5.0) -> str:
    """Why nothing answers at ``url``'s host and port (a TCP connect), or "" when something does or
    when a proxy is set (the connection then goes through it, which only the client knows)."""
    import socket
    from urllib.parse import urlsplit

    if any(os.environ.get(k) for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")):
        return ""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return ""  # the client says what is wrong with it
    if not host:
        return ""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return ""
    except OSError as exc:
        return f"{parts.scheme}://{host}:{port} is not reachable ({_why(exc)})"


def _why(exc: BaseException) -> str:
    """The error, as the monitor shows it: secrets (a URL's user:password) redacted, withheld in
    deny mode, one bounded line (a client's error can quote a whole HTTP exchange)."""
    text = " ".join(error_text(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _flat(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flat(v, key + "."))
        else:
            out[key] = v
    return out


def _config_text(cfg: Mapping[str, Any]) -> str:
    return "\n".join(f"    {k} = {v!r}" for k, v in _flat(cfg).items())
