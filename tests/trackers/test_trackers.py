"""One tiny RL run (SFT warm-up, then GRPO) with every tracker on, read back with each tracker's
own reader: the same scalars at the same steps as metrics.jsonl. Nothing reaches the network:
no WANDB_API_KEY (W&B offline files), MLflow and trackio stores and event files in the run dir."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import engine_env, metrics, rl_config, run_engine, write_run

pytestmark = pytest.mark.slow
MARKER = "ZQXJ-PLANTED-MARKER"
SECRET = "hf_" + "a1B2c3D4" * 5  # a hub token planted in the config: the secret scan must drop it


def _env(home: Path) -> dict[str, str]:
    env = engine_env()
    for k in ("WANDB_API_KEY", "WANDB_MODE", "MLFLOW_TRACKING_URI", "TRACKIO_DIR"):
        env.pop(k, None)
    # W&B's own settings and caches stay under the test's folder
    env.update(WANDB_CONFIG_DIR=str(home / "wandb-config"), WANDB_CACHE_DIR=str(home / "wandb-cache"))
    env.update(WANDB_DATA_DIR=str(home / "wandb-data"), WANDB_SILENT="true")
    return env


def _run(base: Path, name: str, *, deny: bool) -> Path:
    cfg = rl_config(max_steps=2)
    cfg["primenb"].update(sft_warmup_steps=3, sample_every=1, report_to=["trackio", "mlflow", "tensorboard"])
    if deny:
        cfg["primenb"]["privacy"] = {"data_collection": "deny"}
    cfg["monitors"] = {"wandb": {"project": "primenb-test", "name": name, "tags": [MARKER + "-tag", SECRET]}}
    src = cfg["orchestrator"]["train"]["source"]
    cfg["orchestrator"]["eval"] = {"interval": 2, "num_examples": 4, "source": src}
    cfg["run"]["name"] = name
    run_dir = write_run(base / name, cfg)
    proc = run_engine(run_dir, env=_env(base))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("trackers"), "tracked", deny=False)


def expected(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl as key -> [(step, value)], the bookkeeping fields left out."""
    out: dict[str, list[tuple[int, float]]] = {}
    for row in metrics(run_dir):
        for k, v in row.items():
            if k not in ("step", "time", "phase", "nonfinite") and isinstance(v, int | float):
                out.setdefault(k, []).append((row["step"], float(v)))
    return out


def same(got: dict[str, list[tuple[int, float]]], want: dict[str, list[tuple[int, float]]]) -> None:
    assert set(want) <= set(got), sorted(set(want) - set(got))
    for k, pts in want.items():
        g = got[k]
        assert [s for s, _ in g] == [s for s, _ in pts], k
        for (_, a), (_, b) in zip(g, pts, strict=True):
            assert math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6), (k, a, b)


def trace(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "trace.json").read_text())


def test_the_trace_says_where_each_tracker_run_lives(run: Path) -> None:
    want = expected(run)
    assert any(k.startswith("warmup/") for k in want) and "reward" in want  # both phases are there
    where = trace(run)["trackers"]
    assert set(where) == {"wandb", "trackio", "mlflow", "tensorboard"}
    assert "url" not in where["wandb"] and where["wandb"]["run_id"]  # offline: no key in the environment


def test_tensorboard_reads_back_the_stored_metrics(run: Path) -> None:
    same(read_tensorboard(Path(trace(run)["trackers"]["tensorboard"]["folder"])), expected(run))


def test_mlflow_reads_back_the_stored_metrics(run: Path) -> None:
    where, want = trace(run)["trackers"]["mlflow"], expected(run)
    same(read_mlflow(where["uri"], where["run_id"], want), want)


def test_wandb_offline_files_hold_the_stored_metrics(run: Path) -> None:
    same(read_wandb(Path(trace(run)["trackers"]["wandb"]["folder"])), expected(run))


def test_trackio_store_holds_the_stored_metrics(run: Path) -> None:
    where = trace(run)["trackers"]["trackio"]
    same(read_trackio(Path(where["folder"]), where["project"], where["name"]), expected(run))


def read_tensorboard(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def read_mlflow(
    uri: str, run_id: str, want: dict[str, Any], status: str = "FINISHED"
) -> dict[str, list[tuple[int, float]]]:
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # primenb's default store (docs/trackers.md)
    client = MlflowClient(tracking_uri=uri)
    assert client.get_run(run_id).info.status == status
    out = {}
    for k in want:
        hist = client.get_metric_history(run_id, k.replace("/", "."))  # the file store's key spelling
        out[k] = sorted(((m.step, m.value) for m in hist), key=lambda p: [s for s, _ in want[k]].index(p[0]))
    return out


def read_wandb(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from wandb.proto import wandb_internal_pb2

    (path,) = folder.glob("run-*.wandb")  # the trace records the run's folder, the one `wandb sync` takes
    out: dict[str, list[tuple[int, float]]] = {}
    for data in wandb_records(path.read_bytes()):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(data)
        if rec.WhichOneof("record_type") != "history":
            continue
        items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item}
        step = items.pop("primenb/step", None)
        for k, v in items.items():
            if not k.startswith("_") and step is not None:
                out.setdefault(k, []).append((int(step), float(v)))
    return out


def wandb_records(blob: bytes) -> list[bytes]:
    """The records of a W&B transaction log (``run-ID.wandb``): wandb 0.31 reads it in its Go core
    only, so this follows its documented LevelDB-style layout: a 7-byte header (":W&B", magic,
    version), then 32 KiB blocks of chunks (crc32, length, type: full, first, middle, last)."""
    import struct

    assert blob[:4] == b":W&B"
    block, pos, records, partial = 32768, 7, [], b""
    while pos + 7 <= len(blob):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", blob[pos : pos + 7])
        chunk = blob[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            continue
        partial = chunk if kind in (1, 2) else partial + chunk
        if kind in (1, 4):
            records.append(partial)
            partial = b""
    return records


def read_trackio(folder: Path, project: str, run_name: str) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for log in trackio_store(folder, "get_logs", project, run_name):
        step = log.get("step")
        for k, v in log.items():
            if k not in ("step", "timestamp") and isinstance(v, int | float):
                out.setdefault(k, []).append((int(step), float(v)))
    return out


def trackio_store(folder: Path, method: str, *args: Any, **kwargs: Any) -> Any:
    """trackio's own store reader on ``folder``: trackio binds its folder at its first import in a
    process, so the reader's module global is pointed at each store in turn (and put back)."""
    before = os.environ.get("TRACKIO_DIR")
    os.environ["TRACKIO_DIR"] = str(folder)  # a first import must not pick (or make) the user's folder
    try:
        from trackio import sqlite_storage as store
    finally:
        if before is None:
            os.environ.pop("TRACKIO_DIR")
        else:
            os.environ["TRACKIO_DIR"] = before
    bound = store.TRACKIO_DIR
    store.TRACKIO_DIR = Path(folder)
    try:
        return getattr(store.SQLiteStorage, method)(*args, **kwargs)
    finally:
        store.TRACKIO_DIR = bound


def tracker_bytes(run_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (run_dir / "trackers").rglob("*") if p.is_file())


def test_no_sample_text_and_no_secret_reaches_a_tracker(run: Path) -> None:
    blob = tracker_bytes(run)
    assert MARKER.encode() in blob  # control: the config's text is in the trackers' files, searchable
    assert SECRET.encode() not in blob
    texts = sample_texts(run)
    assert texts  # the run did write sample text (the run allows it), and none of it went to a tracker
    assert not [t for t in texts if t.encode() in blob]


def sample_texts(run_dir: Path) -> set[str]:
    texts: set[str] = set()
    for line in (run_dir / "samples.jsonl").read_text().splitlines():
        row = json.loads(line)
        texts |= {t for k in ("prompt", "completion") for t in strings(row.get(k)) if len(t) >= 12}
    return texts


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in strings(v)]
    return []


def test_export_backfills_the_same_curves_once(run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy of the run with its tracker folder removed, recorded as stopped, sent to each tracker
    from its stored metrics, and read back with each tracker's reader: the same curves, the same
    keys as the live run, the run's own ending; exporting again is refused and leaves one copy of
    each point. No network: W&B offline, no key, its folders in tmp; trackio's and MLflow's stores
    shared under the test's PRIME_HOME (the copy reported nothing live: no store of its own)."""
    import shutil

    from primenb.errors import PrimenbError
    from primenb.traces.backfill import backfill
    from tests.trackers.test_endings import tensorboard_state, wandb_ending

    for k in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "TRACKIO_DIR", "MLFLOW_EXPERIMENT_NAME", "WANDB_PROJECT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in _env(tmp_path).items():
        if k.startswith("WANDB_"):
            monkeypatch.setenv(k, v)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    home = tmp_path / "home"  # the export's child reads it: trackio's and MLflow's shared stores
    monkeypatch.setenv("PRIME_HOME", str(home))
    copy = tmp_path / "past"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("trackers", "checkpoints"))
    doc = trace(copy)
    (copy / "trace.json").write_text(json.dumps({**doc, "status": "stopped"}))
    want = expected(copy)

    def twice(kind: str) -> dict[str, str]:
        where = backfill(str(copy), kind)
        with pytest.raises(PrimenbError, match=f"tracker {kind}: .* already.*; exporting again would"):
            backfill(str(copy), kind)
        return where

    where = twice("tensorboard")
    folder = Path(where["folder"])
    assert len(list(folder.glob("events.out.tfevents.*"))) == 1
    exported = read_tensorboard(folder)
    same(exported, want)  # one copy of each point
    assert set(exported) == set(read_tensorboard(Path(trace(run)["trackers"]["tensorboard"]["folder"])))
    assert any(k.startswith("final/eval/") for k in exported)  # the live run's final keys, not final/eval
    assert tensorboard_state(folder)[-1][1] == "stopped"

    where = twice("mlflow")
    assert where["uri"] == (home / "mlflow").resolve().as_uri()  # the store the runs of PRIME_HOME share
    same(read_mlflow(where["uri"], where["run_id"], want, status="KILLED"), want)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=where["uri"])
    (exp,) = [e for e in client.search_experiments() if e.name == "primenb"]
    assert len(client.search_runs([exp.experiment_id])) == 1

    where = twice("wandb")
    assert "url" not in where and Path(where["folder"]).is_relative_to(copy / "trackers")
    assert len(list((copy / "trackers" / "wandb").glob("*run-*"))) == 1
    same(read_wandb(Path(where["folder"])), want)
    assert wandb_ending(Path(where["folder"]))[0] == 130

    where = twice("trackio")
    assert Path(where["folder"]) == home / "trackio"  # the store the runs of PRIME_HOME share
    same(read_trackio(Path(where["folder"]), where["project"], where["name"]), want)
    assert trackio_store(Path(where["folder"]), "get_runs", where["project"]) == [where["name"]]
    alerts = trackio_store(Path(where["folder"]), "get_alerts", where["project"], run_name=where["name"])
    assert [a["title"] for a in alerts] == ["primenb run stopped"]


@pytest.mark.parametrize("kind", ["tensorboard", "mlflow", "wandb", "trackio"])
def test_export_of_a_run_that_reported_live_is_refused(run: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The live run holds a copy in every tracker: exporting it would make a second one."""
    from primenb.errors import PrimenbError
    from primenb.traces.backfill import backfill

    for k in ("WANDB_API_KEY", "MLFLOW_TRACKING_URI", "TRACKIO_DIR", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    before = tracker_bytes(run)
    with pytest.raises(PrimenbError, match=f"tracker {kind}: .* already.*; exporting again would"):
        backfill(str(run), kind)
    assert tracker_bytes(run) == before  # nothing written


def test_export_refuses_an_unknown_tracker(run: Path) -> None:
    from primenb.errors import PrimenbError
    from primenb.traces.backfill import backfill

    with pytest.raises(PrimenbError, match="use one of"):
        backfill(str(run), "neptune")


def test_deny_sends_the_scalars_and_the_config_only(run: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The same run under data_collection = "deny": every scalar still arrives, and no prompt or
    completion of the allowed twin (same config, same data) is in any tracker's files."""
    denied = _run(tmp_path_factory.mktemp("deny"), "denied", deny=True)
    same(read_tensorboard(Path(trace(denied)["trackers"]["tensorboard"]["folder"])), expected(denied))
    blob = tracker_bytes(denied)
    assert MARKER.encode() in blob and SECRET.encode() not in blob  # the config went, scanned
    texts = sample_texts(run)
    assert texts  # control: the allowed twin wrote sample text
    assert not [t for t in texts if t.encode() in blob]
