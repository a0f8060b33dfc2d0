"""Each tracker run ends as the primenb run did (completed, stopped, failed), read back with each
tracker's own reader: MLflow's run status, W&B's exit record and summary in its offline
transaction log, a TensorBoard text summary. trackio (no run state; an alert says it) is read in
the export test of tests/trackers/test_trackers.py, whose child process binds trackio's folder.
Nothing reaches the network: W&B offline, MLflow's file store and the event files under tmp."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from primenb.trackers import TrackerSettings, open_sinks
from tests.trackers.test_trackers import read_tensorboard, wandb_records

MLFLOW = {"completed": "FINISHED", "stopped": "KILLED", "failed": "FAILED"}
WANDB_EXIT = {"completed": 0, "stopped": 130, "failed": 1}


def wandb_ending(folder: Path) -> tuple[int, dict[str, Any]]:
    """The exit code and the summary of a W&B offline run folder (the one `wandb sync` takes)."""
    from wandb.proto import wandb_internal_pb2

    (path,) = folder.glob("run-*.wandb")
    exit_code, summary = -1, {}
    for data in wandb_records(path.read_bytes()):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        kind = rec.WhichOneof("record_type")
        if kind == "exit":
            exit_code = rec.exit.exit_code
        elif kind == "summary":
            summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.summary.update})
    return exit_code, summary


def tensorboard_state(folder: Path) -> list[tuple[int, str]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    acc.Reload()
    return [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("primenb/state")]


@pytest.mark.parametrize("state", ["failed", "stopped", "completed"])
def test_each_tracker_run_ends_as_the_run_did(state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlflow.tracking import MlflowClient

    for k in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", "WANDB_PROJECT"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    fan = open_sinks(["mlflow", "tensorboard", "wandb"], TrackerSettings(root=tmp_path / "t", name="n", trace_id="t1"))
    assert fan.warnings == []
    fan.log_row({"step": 1, "loss": 0.5})
    fan.log_row({"step": 3, "eval/rev/reward": 0.25})
    where = fan.finish({"eval/rev/reward": 0.25}, state)

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=where["mlflow"]["uri"])
    run = client.get_run(where["mlflow"]["run_id"])
    assert run.info.status == MLFLOW[state]
    # the final eval at the last step, under the live key (file store spelling: "/" is ".")
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "final.eval.rev.reward")] == [
        (3, 0.25)
    ]

    tb = Path(where["tensorboard"]["folder"])
    assert tensorboard_state(tb) == [(3, state)]
    assert read_tensorboard(tb)["final/eval/rev/reward"] == [(3, 0.25)]

    exit_code, summary = wandb_ending(Path(where["wandb"]["folder"]))
    assert exit_code == WANDB_EXIT[state]
    assert summary["primenb/state"] == state and summary["final/eval/rev/reward"] == 0.25


def test_an_unknown_ending_is_refused() -> None:
    fan = open_sinks([], TrackerSettings(root=Path("/nonexistent"), name="n"))
    with pytest.raises(ValueError, match="completed, stopped, failed"):
        fan.finish({}, "crashed")


@pytest.mark.slow
def test_a_stopped_engine_run_reads_back_stopped_in_each_tracker(tmp_path: Path) -> None:
    """The engine's own path: a tiny SFT run asked to stop before its first step (the STOP file a
    stop request writes) ends `stopped`, and so does each of its tracker runs."""
    from mlflow.tracking import MlflowClient

    from primenb.protocol.rundir import RunDir
    from tests.engine.conftest import engine_env, run_engine, sft_config, write_run

    cfg = sft_config(max_steps=4)
    cfg["primenb"].update(logging_steps=1, report_to=["mlflow", "tensorboard"])
    cfg["monitors"] = {"wandb": {"project": "primenb-test", "offline": True}}
    cfg["run"]["name"] = "stopped"
    run_dir = write_run(tmp_path / "stopped", cfg)
    RunDir(run_dir).stop_path.write_text("stop")
    env = engine_env()
    for k in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        env.pop(k, None)
    env.update(
        {name: str(tmp_path / name.lower()) for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")}
    )
    proc = run_engine(run_dir, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((run_dir / "status.json").read_text())["state"] == "stopped"
    where = json.loads((run_dir / "trace.json").read_text())["trackers"]
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    assert MlflowClient(tracking_uri=where["mlflow"]["uri"]).get_run(where["mlflow"]["run_id"]).info.status == "KILLED"
    assert tensorboard_state(Path(where["tensorboard"]["folder"]))[-1][1] == "stopped"
    exit_code, summary = wandb_ending(Path(where["wandb"]["folder"]))
    assert exit_code == 130 and summary["primenb/state"] == "stopped"


def test_record_hostname_false_keeps_the_machine_name_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[primenb.privacy] record_hostname = false`: W&B's run record has no host and no system
    metadata or stats records; TensorBoard's event file is not named after the machine. The
    control (true) has both, so the reader does see them."""
    import socket

    from wandb.proto import wandb_internal_pb2

    from primenb.trackers.sinks import records_hostname

    assert records_hostname({"primenb": {"privacy": {"record_hostname": False}}}) is False
    assert records_hostname({}) is True
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    host = socket.gethostname()
    for record in (True, False):
        settings = TrackerSettings(root=tmp_path / str(record), name="n", trace_id="t1", record_hostname=record)
        fan = open_sinks(["tensorboard", "wandb"], settings)
        fan.log_row({"step": 1, "loss": 0.5})
        where = fan.finish({}, "completed")
        (event_file,) = Path(where["tensorboard"]["folder"]).glob("events.out.tfevents.*")
        assert (f".{host}." in event_file.name) is record
        assert read_tensorboard(event_file.parent)["loss"] == [(1, 0.5)]  # still read after the rename
        (log,) = Path(where["wandb"]["folder"]).glob("run-*.wandb")
        hosts, kinds = [], set()
        for data in wandb_records(log.read_bytes()):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(data)
            kinds.add(rec.WhichOneof("record_type"))
            if rec.WhichOneof("record_type") == "run":
                hosts.append(rec.run.host)
        assert (host in hosts) is record, hosts
        assert ("environment" in kinds) is record  # the system metadata (host, machine)
        assert record or "stats" not in kinds  # system stats (sampled on a timer: present or not when on)


def test_local_runs_share_one_mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The local backend gives its engine one store folder for the runs of its PRIME_HOME: two
    runs land in the same MLflow experiment (they compare there out of the box); a remote run
    (no store given) keeps its store in its own run directory, which is what comes back."""
    from mlflow.tracking import MlflowClient

    from primenb.backends.local import engine_env
    from primenb.trackers.sinks import STORE_VAR

    for k in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME", STORE_VAR):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    assert engine_env()[STORE_VAR] == str(tmp_path / "home")
    shared = Path(engine_env()[STORE_VAR])
    ids = []
    for name in ("a", "b"):
        fan = open_sinks(["mlflow"], TrackerSettings(root=tmp_path / name / "trackers", name=name, store=shared))
        fan.log_row({"step": 1, "loss": 0.5})
        where = fan.finish({}, "completed")["mlflow"]
        assert where["uri"] == (shared / "mlflow").resolve().as_uri()
        ids.append(where["run_id"])
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(shared / "mlflow").resolve().as_uri())
    (exp,) = [e for e in client.search_experiments() if e.name == "primenb"]
    assert sorted(r.info.run_id for r in client.search_runs([exp.experiment_id])) == sorted(ids)
    alone = open_sinks(["mlflow"], TrackerSettings(root=tmp_path / "remote" / "trackers", name="r"))
    assert (
        alone.finish({}, "completed")["mlflow"]["uri"]
        == (tmp_path / "remote" / "trackers" / "mlflow").resolve().as_uri()
    )
