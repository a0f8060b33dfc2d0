"""Items 2, 3, 9 and 14 on the harness side: no trace.json blinds the index, a rebuild is all or
nothing, dead runs are noticed, and lookups take ids and filters literally."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from primenb.errors import PrimenbError
from primenb.protocol.liveness import launch_record
from primenb.protocol.record import write_trace
from tests.harness.synth import make_doc, write_runs


def test_item02_oversized_integers_do_not_blind_the_index(home: Path) -> None:
    import primenb.harness as h

    runs = write_runs(home / "outputs", 3)
    doc = make_doc(7)
    doc["config"]["primenb"]["seed"] = 2**64
    doc["steps"] = {"last": 2**70, "max": 2**63}
    doc["revision"] = 10**30
    big = home / "outputs" / "big"
    big.mkdir()
    write_trace(big, doc)
    r = h.reindex([str(home / "outputs")])
    assert r["traces"] == 4 and not r["skipped"]
    (Path(r["index"])).unlink()  # the index deleted: the next read rebuilds it
    df = h.traces()
    assert len(df) == 4
    row = df[df["trace"] == doc["trace_id"]].iloc[0]
    assert row["seed"] != row["seed"] or row["seed"] is None  # not indexed (NaN/None), not a crash
    assert h.get(doc["trace_id"]).id == doc["trace_id"]
    assert all((p / "trace.json").is_file() for p in runs)


def test_item03_a_trace_of_unexpected_shape_is_skipped_and_reported(home: Path) -> None:
    import primenb.harness as h

    write_runs(home / "outputs", 5)
    for name, body in {
        "odd": {"trace_id": 12345, "metrics": [1, 2]},
        "odd2": {"trace_id": "abc0000001", "metrics": [1, 2], "config": [3], "created": "yesterday"},
        "corrupt": "{not json",
    }.items():
        (home / "outputs" / name).mkdir()
        (home / "outputs" / name / "trace.json").write_text(body if isinstance(body, str) else json.dumps(body))
    r = h.reindex([str(home / "outputs")])
    skipped = {Path(p).name for p, _ in r["skipped"]}
    assert skipped == {"odd", "corrupt"}, r["skipped"]
    assert r["traces"] == 6 and len(h.traces()) == 6


def test_item03_an_interrupted_rebuild_keeps_the_old_index(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import primenb.harness as h
    from primenb.protocol import index as index_mod

    write_runs(home / "outputs", 30)
    assert h.reindex([str(home / "outputs")])["traces"] == 30
    real = index_mod.index_row
    calls = {"n": 0}

    def interrupted(*a: object, **k: object) -> dict[str, object]:
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(index_mod, "index_row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        h.reindex()
    monkeypatch.setattr(index_mod, "index_row", real)
    assert len(h.traces()) == 30  # not "(no traces)"
    # the index deleted, and its automatic rebuild interrupted: it must not stay empty for good
    Path(index_mod.Index().path).unlink()
    calls["n"] = 0
    monkeypatch.setattr(index_mod, "index_row", interrupted)
    with pytest.raises(KeyboardInterrupt):
        h.traces()
    monkeypatch.setattr(index_mod, "index_row", real)
    assert len(h.traces()) == 30
    folder = Path(index_mod.harness_home())
    assert not [p for p in folder.iterdir() if ".build-" in p.name]  # no half-built file left


def test_item03_an_index_missing_columns_is_rebuilt(home: Path) -> None:
    import primenb.harness as h
    from primenb.protocol.index import Index

    write_runs(home / "outputs", 4)
    h.reindex([str(home / "outputs")])
    path = Index().path
    con = sqlite3.connect(path)
    con.execute("ALTER TABLE traces DROP COLUMN seed")
    con.commit()
    con.close()
    assert len(h.traces()) == 4
    assert "seed" in h.traces().columns


def _dead_launcher() -> dict[str, object]:
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    record = launch_record(p.pid)
    p.send_signal(signal.SIGKILL)
    p.wait()
    return record


def test_item09_a_killed_run_is_failed_in_the_harness(home: Path) -> None:
    import primenb.harness as h

    (run,) = write_runs(home / "outputs", 1)
    doc = json.loads((run / "trace.json").read_text())
    doc["status"] = "running"
    write_trace(run, doc)
    (run / "status.json").write_text(json.dumps({"state": "running", "step": 3}))
    (run / "launcher.json").write_text(json.dumps(_dead_launcher()))
    h.reindex([str(home / "outputs")])
    assert h.traces()["status"].tolist() == ["failed"]
    assert json.loads((run / "status.json").read_text())["state"] == "failed"
    assert "removed trace" in h.rm(doc["trace_id"])
    assert run.is_dir()  # rm without --files keeps the run directory


def test_item14_id_prefix_is_literal(home: Path) -> None:
    import primenb.harness as h
    from primenb.traces.trace import TraceNotFound

    for tid in ("a1b2c3d4e5",):  # LIKE 'a_b_%' matched it
        d = home / "outputs" / tid
        d.mkdir(parents=True)
        write_trace(d, {**make_doc(1), "trace_id": tid, "name": tid})
    h.reindex([str(home / "outputs")])
    with pytest.raises(TraceNotFound):
        h.get("a_b_")
    with pytest.raises(TraceNotFound):
        h.get("a%b%")
    assert h.get("a1b2").id == "a1b2c3d4e5"


def test_item14_where_keeps_string_literals(home: Path) -> None:
    import primenb.harness as h

    d = home / "outputs" / "eq"
    d.mkdir(parents=True)
    write_trace(d, {**make_doc(1), "trace_id": "e000000001", "name": "a==b"})
    h.reindex([str(home / "outputs")])
    assert h.traces(where="name == 'a==b'")["trace"].tolist() == ["e000000001"]
    with pytest.raises(PrimenbError, match="bad --where"):
        h.traces(where="1=1; DROP TABLE traces")
    assert len(h.traces()) == 1
