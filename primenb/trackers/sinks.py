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

KINDS = ("wandb", "trackio", "mlflow", "tensorboard")


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

    def finish(self, summary: dict[str, float]) -> None:  # noqa: B027 - optional: most sinks close nothing
        """Close the run; ``summary`` is the final eval."""

    def location(self) -> dict[str, str]:
        """Where this tracker run lives: url, folder, run id (recorded in the trace)."""
        return {}


class TensorBoardSink(Sink):
    """Event files written with tensorboard's own writer (no torch: export runs outside the engine)."""

    kind = "tensorboard"

    def __init__(self, s: TrackerSettings) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.folder = s.root / "tensorboard"
        self.writer = EventFileWriter(str(self.folder))
        self._text("primenb/trace", f"{s.trace_id} {s.trace_path}")
        self._text("primenb/config", _config_text(s.config))

    def _event(self, step: int, summary: Any) -> None:
        import time

        from tensorboard.compat.proto.event_pb2 import Event

        self.writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))

    def _text(self, tag: str, text: str) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._event(0, text_pb(tag, text))

    def log(self, step: int, values: dict[str, float]) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event(step, Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]))

    def finish(self, summary: dict[str, float]) -> None:
        if summary:
            self.log(0, {"final/" + k: v for k, v in summary.items()})
        self.writer.close()

    def location(self) -> dict[str, str]:
        return {"folder": str(self.folder)}


class MlflowSink(Sink):
    kind = "mlflow"

    def __init__(self, s: TrackerSettings) -> None:
        from mlflow.tracking import MlflowClient

        # MLFLOW_TRACKING_URI wins; otherwise a file store inside the run directory (never the network)
        uri = os.environ.get("MLFLOW_TRACKING_URI") or ""
        if not uri:
            uri = (s.root / "mlflow").resolve().as_uri()
        if uri.startswith("file:") or "://" not in uri:
            # mlflow-skinny has no SQL store (no sqlalchemy); MLflow 3 keeps the file store behind
            # this documented opt-out. `mlflow migrate-filestore` moves it to a database later.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        if uri.startswith(("http:", "https:")):
            # MLflow retries a request 7 times for up to 120 s each: an unreachable server held a
            # run for 248 s before the first step. One retry, 10 s (the user's own settings win).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        self.client = MlflowClient(tracking_uri=uri)
        exp = self.client.get_experiment_by_name(s.project)
        exp_id = exp.experiment_id if exp else self.client.create_experiment(s.project)
        tags = {"primenb.trace_id": s.trace_id, "primenb.trace": s.trace_path}
        self.run_id = self.client.create_run(exp_id, run_name=s.name, tags=tags).info.run_id
        self.uri = uri
        # the file store makes "a/b" a file under folder "a": a key that is also another key's
        # prefix ("reward_errors", "reward_errors/lcs") cannot be stored, so there "/" becomes "."
        self.key = (lambda k: k.replace("/", ".")) if uri.startswith("file:") else (lambda k: k)
        for k, v in _flat(s.config).items():
            self.client.log_param(self.run_id, k[:250], str(v)[:6000])

    def log(self, step: int, values: dict[str, float]) -> None:
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(self.key(k), v, now, step) for k, v in values.items()])

    def finish(self, summary: dict[str, float]) -> None:
        for k, v in summary.items():
            self.client.log_metric(self.run_id, self.key("final/" + k), v)
        self.client.set_terminated(self.run_id)

    def location(self) -> dict[str, str]:
        return {"uri": self.uri, "run_id": self.run_id}


class TrackioSink(Sink):
    kind = "trackio"

    def __init__(self, s: TrackerSettings) -> None:
        # trackio keeps its store under TRACKIO_DIR; default it into the run directory
        os.environ.setdefault("TRACKIO_DIR", str((s.root / "trackio").resolve()))
        self.folder = os.environ["TRACKIO_DIR"]
        # trackio starts on a folder it cannot write and only warns, from its own thread, that
        # nothing was stored: make the folder first, so that failure is this sink's warning
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        import trackio

        self.trackio = trackio
        # trackio binds its folder at its first import in a process: report the one it uses
        self.folder = str(getattr(sys.modules.get("trackio.utils"), "TRACKIO_DIR", self.folder))
        self.project = s.project
        self.run = trackio.init(project=s.project, name=s.name, config=_flat(s.config), resume="never")

    def log(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def finish(self, summary: dict[str, float]) -> None:
        self.run.finish()

    def location(self) -> dict[str, str]:
        return {"folder": self.folder, "project": self.project, "run_id": str(getattr(self.run, "name", ""))}


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
        folder.mkdir(parents=True, exist_ok=True)
        init: dict[str, Any] = dict(
            project=w.get("project") or s.project,
            entity=w.get("entity"),
            name=w.get("name") or s.name,
            group=w.get("group"),
            tags=w.get("tags"),
            config=s.config,
            notes=f"primenb trace {s.trace_id}: {s.trace_path}",
            dir=str(s.root),
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off", init_timeout=30),
        )
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

    def finish(self, summary: dict[str, float]) -> None:
        for k, v in summary.items():
            self.run.summary["final/" + k] = v
        self.run.finish()

    def location(self) -> dict[str, str]:
        out = {"folder": str(self.run.dir), "run_id": str(self.run.id)}
        if self.run.url:
            out["url"] = str(self.run.url)
        return out


_FACTORIES: dict[str, Callable[[TrackerSettings], Sink]] = {
    "tensorboard": TensorBoardSink,
    "mlflow": MlflowSink,
    "trackio": TrackioSink,
    "wandb": WandbSink,
}


class Fanout:
    """The open sinks. A sink that raises is closed and dropped; its error is kept in ``warnings``
    and passed to ``on_warning`` (the engine puts them in status.json, which the monitor shows)
    and the run goes on."""

    def __init__(self, sinks: list[Sink], warnings: list[str]) -> None:
        self.sinks = sinks
        self.warnings = warnings
        self.on_warning: Callable[[list[str]], None] | None = None

    def warn(self, msg: str) -> None:
        log.warning("%s", msg)
        self.warnings.append(msg)
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
            self.warn(f"tracker {sink.kind}: {what} failed ({_why(exc)}); it is off for this run")
            return False

    def log_row(self, row: Mapping[str, Any]) -> None:
        values = scalars(row)
        step = row.get("step")
        if not values or not isinstance(step, int):
            return
        self.sinks = [s for s in self.sinks if self._guard(s, "log", s.log, step, values)]

    def finish(self, summary: Mapping[str, Any]) -> dict[str, dict[str, str]]:
        """Close every sink; returns where each run lives (for the trace)."""
        final = scalars(summary)
        where: dict[str, dict[str, str]] = {}
        for s in self.sinks:
            where[s.kind] = {}
            self._guard(s, "location", lambda sink, out: out.update(sink.location()), s, where[s.kind])
            self._guard(s, "finish", s.finish, final)
        self.sinks = []
        return where


def open_sinks(kinds: list[str], settings: TrackerSettings) -> Fanout:
    """Open one sink per kind (unknown kinds are refused by the config schema before this)."""
    sinks: list[Sink] = []
    warnings: list[str] = []
    for kind in dict.fromkeys(kinds):
        try:
            settings.root.mkdir(parents=True, exist_ok=True)  # each sink's own failure if it cannot be
            sink = _FACTORIES[kind](settings)
            sinks.append(sink)
            if sink.note:
                log.warning("%s", sink.note)
                warnings.append(sink.note)
        except ImportError as exc:
            msg = f"tracker {kind}: not installed ({exc.name}); install primenb[trackers]"
            log.warning("%s", msg)
            warnings.append(msg)
        except Exception as exc:
            msg = f"tracker {kind}: could not start ({_why(exc)}); the run goes on without it"
            log.warning("%s", msg)
            warnings.append(msg)
    return Fanout(sinks, warnings)


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
