"""The harness index without training: concurrent writers, rebuilds, filters, summaries."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import primenb.harness as h
from primenb.errors import PrimenbError
from primenb.protocol.index import Index
from primenb.protocol.record import compare_metrics, metrics_summary, read_trace, write_trace
from tests.harness.synth import make_doc, write_runs

ROOT = Path(__file__).resolve().parents[2]


def test_two_processes_writing_at_once_lose_nothing(home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.harness.synth", str(home / "runs"), "150", p],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in ("a", "b")
    ]
    seen = 0
    while any(p.poll() is None for p in procs):  # a reader meanwhile never fails either
        seen = max(seen, len(h.traces()))
    for p in procs:
        assert p.wait() == 0, p.stderr.read() if p.stderr else ""
    df = h.traces()
    assert len(df) == 300 and seen <= 300
    assert {t[0] for t in df["trace"]} == {"a", "b"}
    assert Index().query("PRAGMA journal_mode")[0][0] == "wal"


def test_writers_racing_a_freshly_rebuilt_index_lose_nothing(home: Path) -> None:
    """Rebuilds (reindex, a missing index) swap a new file in; writers that open it first at the
    same moment used to meet 'database is locked' outside every retry (CI lost a trace so): each
    round rebuilds and six writers open and write at once."""
    import threading

    index = Index()
    failures: list[str] = []

    def write(k: int, r: int) -> None:
        for i in range(5):
            try:
                Index().upsert(make_doc(100 * r + 10 * k + i, prefix=f"w{k}"), home / "runs" / f"w{r}-{k}-{i}")
            except Exception as exc:
                failures.append(repr(exc))

    for r in range(25):
        index.reindex()
        # a rebuilt file is WAL from birth: no writer has to switch it (an exclusive lock) under load
        con = sqlite3.connect(index.path)
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        con.close()
        threads = [threading.Thread(target=write, args=(k, r)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures
        # every write of the round is there (the next round's reindex drops them: no trace files)
        assert Index().count() == 30


def test_missing_index_is_rebuilt_and_reindex_prunes(home: Path) -> None:
    dirs = write_runs(home / "runs", 12)
    index = Index()
    index.path.unlink()
    assert len(h.traces()) == 12  # rebuilt from roots.txt on first open
    import shutil

    shutil.rmtree(dirs[0])
    assert len(h.traces()) == 12  # only an index: stale until reindexed
    assert h.reindex()["traces"] == 11 and len(h.traces()) == 11
    # a folder the index never heard of
    other = write_runs(home / "elsewhere", 3, prefix="x", index=False)
    assert len(h.traces()) == 11
    assert h.reindex([str(other[0].parent)])["traces"] == 14
    assert set(h.traces(where="trace LIKE 'x%'")["trace"]) == {"x00000000", "x00000001", "x00000002"}
    roots = Index().folder / "roots.txt"
    shutil.rmtree(home / "elsewhere")
    assert str((home / "elsewhere").resolve()) in roots.read_text()
    assert h.reindex()["traces"] == 11
    assert str((home / "elsewhere").resolve()) not in roots.read_text()  # gone folders are forgotten


def test_a_newer_revision_is_never_replaced_by_an_older_one(home: Path) -> None:
    run = home / "runs" / "r"
    run.mkdir(parents=True)
    doc = make_doc(1, status="running")
    write_trace(run, doc)
    old = json.loads(json.dumps(doc))
    doc["status"] = "completed"
    write_trace(run, doc)
    index = Index()
    index.upsert(doc, run)
    index.upsert(old, run)  # a late, older write
    assert h.traces()["status"].tolist() == ["completed"]


def test_a_trace_left_running_by_a_dead_engine_is_completed_from_status(home: Path) -> None:
    run = home / "runs" / "dead"
    run.mkdir(parents=True)
    write_trace(run, make_doc(7, status="running"))
    h.reindex([str(run.parent)])
    (run / "status.json").write_text(
        json.dumps(
            {
                "state": "failed",
                "step": 3,
                "ended_at": "2026-01-01T00:00:00+0000",
                "error": "the training process was killed by signal 9",
            }
        )
    )
    df = h.traces()
    assert df["status"].tolist() == ["failed"] and df["steps"].tolist() == [3]
    doc = read_trace(run)
    assert doc["status"] == "failed" and "signal 9" in doc["error"] and doc["completed_by"].startswith("harness")


def test_filters_and_where(home: Path) -> None:
    write_runs(home / "runs", 20)
    assert h.traces()["trace"].tolist()[0] == "t00000019"  # newest first
    assert len(h.traces(last=5)) == 5
    assert set(h.traces(where="lora_rank = 5")["trace"]) == {"t00000005", "t00000015"}
    assert len(h.traces(where="lr == 2e-4 and mode == 'rl'")) == len([i for i in range(20) if i % 3 == 1 and i % 2])
    assert len(h.traces(status="completed,failed")) == 20 and len(h.traces(status="failed")) == 0
    with pytest.raises(PrimenbError, match="bad --where"):
        h.traces(where="1=1; DROP TABLE traces")
    with pytest.raises(PrimenbError, match="bad --where"):
        h.traces(where="1=1) OR (SELECT 1 FROM nowhere")
    with pytest.raises(PrimenbError, match="bad --where"):  # the connection is read-only
        h.traces(where="(SELECT count(*) FROM (SELECT 1)) = 1 UNION SELECT * FROM traces WHERE 0")
    assert len(h.traces()) == 20
    with pytest.raises(sqlite3.OperationalError):
        Index().query("DELETE FROM traces")  # query_only


def test_lookup_by_id_prefix_name_and_dir(home: Path) -> None:
    dirs = write_runs(home / "runs", 3)
    assert h.get("t00000001").name == "t-run-1"
    assert h.get("t-run-2").id == "t00000002"
    assert h.get(str(dirs[0])).id == "t00000000"
    with pytest.raises(PrimenbError, match="matches 3 traces"):
        h.get("t0000")
    with pytest.raises(PrimenbError, match="no trace"):
        h.get("zzzz")


def test_empty_table_and_magic_without_traces(home: Path, shell) -> None:  # type: ignore[no-untyped-def]
    df = h.traces()
    assert len(df) == 0 and "no traces yet" in df._repr_html_() and repr(df) == "(no traces)"
    result = shell.run_cell("%prime_harness show")
    assert result.success and len(result.result) == 0
    bad = shell.run_cell("%prime_harness frobnicate")
    assert not bad.success and "unknown subcommand" in str(bad.error_in_exec)


def test_metrics_summary_and_comparison() -> None:
    rows = [
        {"step": 0, "time": 1.0, "eval/e/reward": 0.1, "eval/e/exact_match": 0.0, "eval/time_s": 2.0},
        {"step": 1, "time": 2.0, "reward": 0.2, "loss": 3.0, "step_time": 0.5, "tokens/s": 10.0},
        {"step": 2, "time": 3.0, "reward": 0.6, "loss": 2.0},
        {"step": 2, "time": 3.1, "eval/e/reward": 0.7, "eval/e/exact_match": 0.5},
        {"step": 3, "time": 4.0, "reward": 0.4, "loss": 1.0},
        {"step": 4, "time": 5.0, "eval/e/reward": 0.5, "eval/e/exact_match": 0.25},
    ]
    s = metrics_summary(rows)
    assert s["eval"]["eval/e/reward"] == {
        "final": 0.5,
        "final_step": 4,
        "best": 0.7,
        "best_step": 2,
        "first": 0.1,
        "points": 3,
    }
    assert s["best_eval"] == {"key": "eval/e/reward", "value": 0.7, "step": 2}
    assert s["curves"]["reward"]["best_step"] == 2 and s["curves"]["loss"]["best_step"] == 3
    assert s["final_reward"] == 0.4 and s["final_loss"] == 1.0 and "tokens/s" not in s["final"]
    same = [{**r, "time": r["time"] + 100, "tokens/s": 99.0} for r in rows]
    assert compare_metrics(rows, same)["metrics_match"] is True  # wall-clock keys ignored
    other = [dict(r) for r in rows]
    other[2]["loss"] = 2.0000001
    res = compare_metrics(rows, other)
    assert res["metrics_match"] is False and res["mismatches"][0]["key"] == "loss"
    assert res["max_abs_diff"] == pytest.approx(1e-7)
    assert compare_metrics(rows, rows[:-1])["metrics_match"] is False  # a row missing


def test_import_primenb_and_harness_stay_light() -> None:
    code = (
        "import sys, primenb, primenb.harness, primenb.notebook.magics, primenb.cli, primenb.verbs.harness; "
        "print(sorted(m for m in ('torch', 'pandas', 'plotly', 'transformers', 'sqlite3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
