"""The sidebar's TypeScript types are generated from the typed run documents: no drift."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from primenb.protocol.documents import STATES, IndexRow, State, StatusDoc, TraceDoc, json_schema, parse
from primenb.protocol.index import Index, index_row
from primenb.protocol.rundir import RunDir, StatusFile, now_iso
from primenb.protocol.tsgen import default_path, render


def test_generated_typescript_matches_the_documents() -> None:
    committed = default_path().read_text(encoding="utf-8")
    assert committed == render(), "run `python -m primenb.protocol.tsgen` and commit labextension/src/documents.ts"


def test_schema_exports_every_document_with_a_version() -> None:
    schema = json_schema()
    assert {"StatusDoc", "TraceDoc", "MetricRow", "SampleRow", "IndexRow", "ManifestDoc", "EvalDoc"} <= set(
        schema["$defs"]
    )
    assert set(schema["versions"]) == {"status", "trace", "manifest", "index", "eval"}


def test_the_exported_states_are_the_ones_the_reader_accepts() -> None:
    """The schema's state enum (the sidebar's `IState`) against what the tolerant reader keeps: every
    value it lists is read without a warning; a value it does not list is read as unknown."""
    enum = json_schema()["$defs"]["State"]["enum"]
    assert set(STATES) <= set(enum)
    for value in enum:
        for model, field in ((StatusDoc, "state"), (TraceDoc, "status")):
            parsed = parse(model, {field: value})
            assert parsed.warnings == [] and parsed[field] == value, (model, value)
    for foreign in ("hibernating", "RUNNING", 3):
        parsed = parse(StatusDoc, {"state": foreign})
        assert "state" not in parsed and parsed.warnings, foreign


def test_the_documents_producers_write_are_read_back_as_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Field by field against the producers: the engine's status and trace recorders and the index.
    What they write parses with no warning (every declared field has the type it is written with),
    carries the version the schema exports, and the index row, the SQLite table and the schema's
    `IndexRow` (the sidebar's `IIndexRow`) list the same columns in the same order and types."""
    from primenb.engine.trace import TraceRecorder

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    schema = json_schema()
    files = RunDir(tmp_path / "run")
    files.root.mkdir()
    status = StatusFile(files)
    status.start(phase="starting", name="run", backend="local", queued_at=now_iso())
    status.update(mode="rl", max_steps=3, model="primenb/tiny-byte", step=2, phase_step=2, phase_total=3)
    recorder = TraceRecorder(files)
    recorder.begin({"model": {"name": "primenb/tiny-byte"}}, status.data)
    status.update(trace_id=recorder.trace_id)
    status.finish(State.COMPLETED, final_checkpoint=None, wall_s=1.5)

    raw_status = json.loads(files.status_path.read_text())
    parsed = parse(StatusDoc, raw_status)
    assert parsed.warnings == [] and raw_status["version"] == schema["versions"]["status"]
    raw_trace = json.loads(files.trace_path.read_text())
    parsed = parse(TraceDoc, raw_trace)
    assert parsed.warnings == [] and raw_trace["trace_version"] == schema["versions"]["trace"]

    declared = schema["$defs"]["IndexRow"]["properties"]
    row = index_row(raw_trace, files.root)
    assert sorted(row) == sorted(declared)  # every column filled by the producer, none undeclared
    assert parse(IndexRow, row).warnings == []
    con = sqlite3.connect(Index().path)
    try:
        table = [(name, kind) for _, name, kind, *_ in con.execute("PRAGMA table_info(traces)")]
        version = con.execute("PRAGMA user_version").fetchone()[0]
    finally:
        con.close()
    assert [name for name, _ in table] == list(declared)
    assert version == schema["versions"]["index"]
    sql = {"integer": "INTEGER", "number": "REAL", "string": "TEXT"}
    for name, kind in table:
        types = {t.get("type") for t in declared[name].get("anyOf", [declared[name]])} - {"null"}
        assert kind.split()[0] == sql[types.pop()] and not types, (name, kind, declared[name])


def test_the_final_values_are_declared_once() -> None:
    """`Finals` declares each final value; the metrics that have one, the trace summary and the
    index column all use that name, so a rename there reaches every reader (issue 43)."""
    from primenb.protocol import metrics as M
    from primenb.protocol.documents import FINAL_LOSS, FINAL_REWARD, FINALS, Finals, MetricsSummary

    assert FINALS == (FINAL_REWARD, FINAL_LOSS) == tuple(Finals.model_fields)
    assert {m.final for m in M.METRICS if m.final} == set(FINALS)
    assert set(FINALS) <= set(MetricsSummary.model_fields) and set(FINALS) <= set(IndexRow.model_fields)
    doc = {"trace_id": "f1nal5", "metrics": {FINAL_REWARD: 0.75, FINAL_LOSS: 0.5}}
    row = index_row(doc, "/runs/f1nal5", resolved=True)
    assert {name: row[name] for name in FINALS} == {FINAL_REWARD: 0.75, FINAL_LOSS: 0.5}


@pytest.mark.parametrize("content", [b"\xff\xfe not json", b"[[[[" * 5000, b'"a string"', b"{}"])
def test_the_typed_readers_read_bad_bytes_as_no_document(tmp_path: Path, content: bytes) -> None:
    from primenb.protocol.record import read_trace_doc

    files = RunDir(tmp_path)
    files.status_path.write_bytes(content)
    files.trace_path.write_bytes(content)
    assert files.status_doc() == StatusDoc() and read_trace_doc(tmp_path) is None


def test_the_typed_readers_return_documents_without_wrong_typed_fields(tmp_path: Path) -> None:
    from primenb.protocol.documents import read_status_doc
    from primenb.protocol.record import read_trace_doc, write_trace

    files = RunDir(tmp_path)
    files.status_path.write_text(json.dumps({"state": "running", "step": "3", "max_steps": 9, "extra": [1]}))
    status = read_status_doc(files.status_path)
    assert (status.state, status.step, status.max_steps) == (State.RUNNING, None, 9)
    assert status == files.status_doc() and status.model_extra == {"extra": [1]}
    write_trace(tmp_path, {"trace_id": "abc123", "steps": {"last": 4, "max": "9"}, "metrics": {"final_reward": 0.5}})
    trace = read_trace_doc(tmp_path)
    assert isinstance(trace, TraceDoc) and trace.trace_id == "abc123"
    assert trace.steps is not None and (trace.steps.last, trace.steps.max) == (4, None)
    assert trace.metrics is not None and trace.metrics.final_reward == 0.5
