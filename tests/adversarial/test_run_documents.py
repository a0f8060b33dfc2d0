"""Issue 22, by class: every file read from a run directory or a bundle is hostile input. One
reader (primenb.protocol.reader) and the typed documents (primenb.protocol.documents) hold each
class; the fuzz properties generate documents from the typed models' fields."""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError
from primenb.protocol.documents import ManifestDoc, StatusDoc, TraceDoc
from primenb.protocol.record import write_trace
from tests.harness.synth import make_doc, write_runs

DEEP = "[" * 50_000 + "]" * 50_000
SURROGATE = "\udc80"


def _viewers(home: Path) -> None:
    """Every viewer of the harness, over every indexed run: none may raise."""
    import primenb.harness as h
    from primenb.run import Run
    from primenb.server import data

    df = h.traces()
    repr(df)
    df._repr_html_()
    listing = data.list_traces(limit=500)
    json.dumps(listing, ensure_ascii=False).encode("utf-8")
    for item in listing["items"]:
        detail = data.trace_detail(item["trace"])
        json.dumps(detail, ensure_ascii=False).encode("utf-8")
        json.dumps(data.metrics_after(item["trace"]), ensure_ascii=False).encode("utf-8")
        json.dumps(data.samples(item["trace"], 5), ensure_ascii=False).encode("utf-8")
        t = h.get(item["trace"])
        repr(t)
        t._repr_html_()
        run = Run(t.run_dir)
        repr(run.status)
        run.metric_rows()
        run.logs(5)


def _run(home: Path, name: str = "victim") -> Path:
    run_dir = home / "outputs" / name
    run_dir.mkdir(parents=True)
    write_trace(run_dir, make_doc(999, prefix="v"))
    return run_dir


# -- deep nesting -------------------------------------------------------------------------------
@pytest.mark.parametrize("file", ["trace.json", "status.json", "metrics.jsonl", "samples.jsonl", "launcher.json"])
def test_deep_nesting_in_any_run_file_never_raises(home: Path, file: str) -> None:
    import primenb.harness as h

    write_runs(home / "outputs", 3)
    run_dir = _run(home)
    if file == "trace.json":
        doc = make_doc(999, prefix="v")
        text = json.dumps(doc)[:-1] + ', "config2": ' + DEEP + "}"
        (run_dir / file).write_text(text)
    elif file.endswith(".jsonl"):
        (run_dir / file).write_text(DEEP + "\n" + json.dumps({"step": 1, "reward": 0.5, "x": DEEP[:400]}) + "\n")
    else:
        (run_dir / file).write_text('{"state": "running", "x": ' + DEEP + "}")
    r = h.reindex([str(home / "outputs")])
    assert r["traces"] >= 3
    (Path(r["index"])).unlink()  # an index that must be rebuilt comes back
    assert len(h.traces()) >= 3
    _viewers(home)


# -- lone surrogates and invalid UTF-8 ----------------------------------------------------------
def test_lone_surrogates_and_invalid_utf8_in_text_fields_are_replaced(home: Path) -> None:
    import primenb.harness as h

    write_runs(home / "outputs", 2)
    run_dir = home / "outputs" / "sur"
    run_dir.mkdir(parents=True)
    doc = make_doc(5, prefix="s")
    doc["name"] = f"bad{SURROGATE}name"
    doc["error"] = SURROGATE * 3
    doc["config"]["x"] = {SURROGATE: SURROGATE}
    (run_dir / "trace.json").write_text(json.dumps(doc))  # ASCII JSON with a \udc80 escape
    (run_dir / "status.json").write_bytes(b'{"state": "failed", "error": "\xff\xfe oops \\udc80"}')
    (run_dir / "metrics.jsonl").write_bytes(b'{"step": 1, "phase": "\\ud800", "reward": 1}\n')
    h.reindex([str(home / "outputs")])
    names = set(h.traces()["name"])
    assert "bad\ufffdname" in names
    _viewers(home)


# -- one wrong-typed field degrades one cell --------------------------------------------------
def test_one_wrong_typed_field_degrades_one_cell_of_one_row(home: Path) -> None:
    import primenb.harness as h
    from primenb.server import data

    write_runs(home / "outputs", 4)
    run_dir = _run(home)
    (run_dir / "status.json").write_text(json.dumps({"state": "completed", "ended_at": 12345, "step": "ten"}))
    doc = json.loads((run_dir / "trace.json").read_text())
    doc.update(duration_s="long", steps=[1, 2], metrics={"best_eval": {"value": "high", "step": 3}}, host=7)
    (run_dir / "trace.json").write_text(json.dumps(doc))
    h.reindex([str(home / "outputs")])
    df = h.traces()
    assert len(df) == 5
    row = df[df["trace"] == doc["trace_id"]].iloc[0]
    assert row["name"] == doc["name"] and row["status"] == "completed"
    assert row["duration"] != row["duration"] or row["duration"] is None  # unknown, not a crash
    detail = data.trace_detail(doc["trace_id"])
    assert any("duration_s" in w for w in detail["warnings"]), detail["warnings"]
    _viewers(home)


# -- special files ------------------------------------------------------------------------------
def test_special_files_in_a_run_directory_are_not_read(home: Path) -> None:
    import primenb.harness as h

    write_runs(home / "outputs", 2)
    fifo_run = home / "outputs" / "fifo"
    fifo_run.mkdir()
    os.mkfifo(fifo_run / "trace.json")
    zero_run = _run(home, "zero")
    (zero_run / "status.json").symlink_to("/dev/zero")
    (zero_run / "metrics.jsonl").symlink_to("/dev/zero")
    os.mkfifo(zero_run / "samples.jsonl")
    done: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: done.update(r=h.reindex([str(home / "outputs")])), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "reindex hung on a FIFO"
    assert done["r"]["traces"] == 3
    assert any(Path(p).name == "fifo" for p, _ in done["r"]["skipped"])
    _viewers(home)


# -- reindex keeps concurrent updates -----------------------------------------------------------
@pytest.mark.slow  # 1200 fsynced trace writes: ~20-50 s on a shared machine
def test_reindex_keeps_every_concurrent_update(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1200 traces written and indexed (as engines do) while a reindex scans and swaps: every one
    is in the index afterwards (before the fix, those written during the scan were lost)."""
    import primenb.protocol.index as index_module
    from primenb.protocol.index import Index, index_trace

    real_row = index_module.index_row

    def slow_scan_row(doc: dict[str, Any], run_dir: Any, *, resolved: bool = False) -> dict[str, Any]:
        if resolved:  # the rebuild's scan, as on a slow disk: writers run meanwhile
            time.sleep(0.004)
        return real_row(doc, run_dir, resolved=resolved)

    monkeypatch.setattr(index_module, "index_row", slow_scan_row)
    root = home / "outputs"
    write_runs(root, 600, index=False)  # a rebuild with something to scan
    Index().add_root(root)
    Index().connect().close()  # an index exists: writers do not wait for the rebuild to create one
    started = threading.Event()
    result: dict[str, Any] = {}

    def rebuild() -> None:
        started.set()
        result.update(Index().reindex([str(root)]))

    def update(ids: range) -> None:
        for i in ids:
            run_dir = root / f"new-{i}"
            run_dir.mkdir()
            doc = make_doc(i, prefix="n")
            write_trace(run_dir, doc)
            assert index_trace(doc, run_dir)

    rebuilder = threading.Thread(target=rebuild)
    rebuilder.start()
    started.wait()
    writers = [threading.Thread(target=update, args=(range(k, 1200, 4),)) for k in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(600)
    rebuilder.join(600)
    assert result["traces"] >= 600
    rows = dict(Index().query("SELECT trace, revision FROM traces WHERE trace LIKE 'n%'"))
    missing = [i for i in range(1200) if f"n{i:08d}" not in rows]
    assert not missing, f"{len(missing)} of 1200 concurrent traces lost by the reindex"


# -- a dead run whose folder cannot be written ------------------------------------------------
def test_a_dead_run_in_a_full_or_read_only_folder_is_not_running(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    import primenb.harness as h
    import primenb.protocol.record as record
    from primenb.protocol.liveness import launch_record
    from primenb.server import data

    run_dir = home / "outputs" / "dead"
    run_dir.mkdir(parents=True)
    doc = make_doc(1, prefix="d", status="running")
    write_trace(run_dir, doc)
    proc = subprocess.Popen(["sleep", "0"], start_new_session=True)
    proc.wait()
    (run_dir / "launcher.json").write_text(json.dumps(launch_record(proc.pid)))
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3}))
    h.reindex([str(home / "outputs")])  # reconciles once: make it unable to write afterwards
    write_trace(run_dir, doc)
    (run_dir / "status.json").write_text(json.dumps({"state": "running", "step": 3}))

    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(record, "write_trace", full)
    monkeypatch.setattr("primenb.protocol.rundir.atomic_write_json", full)
    h.reindex([str(home / "outputs")])
    assert list(h.traces()["status"]) == ["failed"]
    assert [i["status"] for i in data.list_traces()["items"]] == ["failed"]
    assert data.trace_detail(doc["trace_id"])["status"] == "failed"


# -- time stamps keep their offset --------------------------------------------------------------
def test_iso_to_epoch_keeps_the_utc_offset() -> None:
    from primenb.protocol.record import iso_to_epoch

    utc = iso_to_epoch("2026-01-01T12:00:00+0000")
    assert utc == 1767268800.0
    assert iso_to_epoch("2026-01-01T14:00:00+02:00") == utc
    assert iso_to_epoch("2026-01-01T12:00:00Z") == utc
    assert iso_to_epoch("yesterday") is None and iso_to_epoch(None) is None


# -- bundles ------------------------------------------------------------------------------------
def _bundle(root: Path, **manifest: Any) -> Path:
    b = root / "bundle"
    (b / "configs").mkdir(parents=True)
    (b / "configs" / "config.toml").write_text("max_steps = 2\n")
    (b / "trace.json").write_text(json.dumps({"trace_id": "abcdef0123", "name": "ok-run", "status": "completed"}))
    (b / "primenb_export.json").write_text(json.dumps({"trace_id": "abcdef0123", "name": "ok-run", **manifest}))
    return b


def test_import_refuses_a_bundle_with_special_files(home: Path) -> None:
    import primenb.harness as h

    bundle = _bundle(home.parent)
    os.mkfifo(bundle / "configs" / "pipe")
    done: dict[str, Any] = {}

    def go() -> None:
        try:
            h.import_(bundle)
        except PrimenbError as exc:
            done["error"] = str(exc)

    worker = threading.Thread(target=go, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive(), "import hung on a FIFO"
    assert "not regular files" in done.get("error", ""), done
    assert not (home / "outputs").exists()


def test_import_on_a_full_disk_is_a_message_and_leaves_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import primenb.harness as h
    import primenb.traces.transfer as transfer

    bundle = _bundle(home.parent)

    def full(*_a: Any, **_k: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transfer, "_copy_file", full)
    with pytest.raises(PrimenbError, match="No space left"):
        h.import_(bundle)
    assert not (home / "outputs" / "ok-run").exists()


@pytest.mark.parametrize("revision", ["7", 10**40, -3, None, [1], 1.5])
def test_import_takes_odd_revision_values(home: Path, revision: object) -> None:
    import primenb.harness as h

    bundle = _bundle(home.parent)
    doc = json.loads((bundle / "trace.json").read_text())
    doc["revision"] = revision
    (bundle / "trace.json").write_text(json.dumps(doc))
    t = h.import_(bundle)
    assert t.id == "abcdef0123" and h.get("abcdef0123").id == t.id


def test_a_final_checkpoint_outside_the_run_directory_is_never_used(home: Path, tmp_path: Path) -> None:
    from primenb.protocol.record import final_checkpoint

    secret = tmp_path / "secret-folder"
    secret.mkdir()
    run_dir = _run(home)
    assert final_checkpoint(run_dir, {"state": "completed", "final_checkpoint": str(secret)}) is None
    inside = run_dir / "checkpoints" / "step_2"
    inside.mkdir(parents=True)
    assert final_checkpoint(run_dir, {"state": "completed", "final_checkpoint": str(inside)})["path"] == str(inside)


# -- fuzz by type -------------------------------------------------------------------------------
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from([SURROGATE, "\ud800x", "\x00", "é" * 30]),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just("DEEP"),
)


def _fields(model: type[Any]) -> list[str]:
    return list(model.model_fields)


def _documents(model: type[Any], base: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``base`` with some of ``model``'s fields replaced by values of any type (deep, huge, odd)."""
    return st.dictionaries(st.sampled_from(_fields(model)), HOSTILE, max_size=4).map(lambda d: {**base, **d})


def _dump(doc: dict[str, Any]) -> str:
    text = json.dumps(doc, allow_nan=True)
    return text.replace('"DEEP"', "[" * 500 + "]" * 500)  # parses, nested far deeper than any reader walks


@pytest.fixture
def fuzz_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path_factory.mktemp("fuzz")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRIME_HOME", str(root / "home"))
    write_runs(root / "outputs", 2)
    (root / "outputs" / "v").mkdir()
    return root


@pytest.mark.slow  # 200 examples through every viewer: minutes on a shared 2-core machine
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    trace=_documents(TraceDoc, {"trace_id": "vfuzz00001", "status": "running"}),
    status=_documents(StatusDoc, {"state": "running"}),
    row=st.dictionaries(st.sampled_from(["step", "reward", "loss", "phase", "time"]), HOSTILE, max_size=4),
)
def test_fuzz_no_viewer_raises_on_any_typed_document(
    fuzz_home: Path, trace: dict[str, Any], status: dict[str, Any], row: dict[str, Any]
) -> None:
    from primenb.protocol.documents import parse
    from primenb.protocol.index import Index, index_row
    from primenb.protocol.reader import loads
    from primenb.protocol.rundir import metric_row, read_metrics
    from primenb.protocol.tail import JsonlTail
    from primenb.run import Run
    from primenb.server import data
    from primenb.traces.table import query
    from primenb.traces.trace import Trace

    run_dir = fuzz_home / "outputs" / "v"
    trace["trace_id"] = "vfuzz00001"
    (run_dir / "trace.json").write_text(_dump(trace))
    (run_dir / "status.json").write_text(_dump(status))
    (run_dir / "metrics.jsonl").write_text(_dump(row) + "\n" + json.dumps({"step": 1, "reward": 0.5}) + "\n")
    doc = parse(TraceDoc, loads(_dump(trace)))
    assert doc is not None
    index = Index()
    index.upsert_many([index_row(doc, run_dir)])
    t = Trace.load(run_dir)
    repr(t)
    t._repr_html_()
    run = Run(run_dir)
    run.status  # noqa: B018
    run.state  # noqa: B018
    read_metrics(run.files.metrics_path)
    tail = JsonlTail(run.files.metrics_path)  # the monitor's reading
    [metric_row(r) for r in tail.read_new()]
    frame = query(index=index)  # `harness show`
    repr(frame)
    frame._repr_html_()
    listing = data.list_traces(limit=10)
    json.dumps(listing, ensure_ascii=False).encode("utf-8")
    json.dumps(data.trace_detail("vfuzz00001"), ensure_ascii=False).encode("utf-8")
    json.dumps(data.metrics_after("vfuzz00001"), ensure_ascii=False).encode("utf-8")


SPECIAL = st.sampled_from(["fifo", "link-dev-zero", "link-outside", "dir-as-file"])
PLACES = st.sampled_from(["configs/x", "metrics.jsonl", "samples.jsonl", "status.json", "final/weights"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    specials=st.lists(st.tuples(SPECIAL, PLACES), max_size=2, unique_by=lambda t: t[1]),
    manifest=_documents(ManifestDoc, {"trace_id": "abcdef0123", "name": "ok-run"}),
    trace=_documents(TraceDoc, {"trace_id": "abcdef0123", "name": "ok-run", "status": "completed"}),
)
def test_fuzz_import_of_any_bundle_is_an_import_or_a_message(
    tmp_path_factory: pytest.TempPathFactory, specials: list[tuple[str, str]], manifest: Any, trace: Any
) -> None:
    import primenb.harness as h

    root = tmp_path_factory.mktemp("bundle")
    bundle = root / "b"
    (bundle / "configs").mkdir(parents=True)
    (bundle / "final").mkdir()
    trace.update(trace_id="abcdef0123", name="ok-run")
    manifest.update(trace_id="abcdef0123")
    (bundle / "trace.json").write_text(_dump(trace))
    (bundle / "primenb_export.json").write_text(_dump(manifest))
    for kind, place in specials:
        path = bundle / place
        path.unlink(missing_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "link-dev-zero":
            path.symlink_to("/dev/zero")
        elif kind == "link-outside":
            path.symlink_to(root)
        else:
            path.mkdir()
    done: dict[str, Any] = {}

    def go() -> None:
        try:
            done["trace"] = h.import_(bundle, root / "dest")
        except PrimenbError as exc:
            done["error"] = str(exc)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIME_HOME", str(root / "home"))
        worker = threading.Thread(target=go, daemon=True)
        worker.start()
        worker.join(30)
    assert not worker.is_alive(), "import hung"
    assert done, "import raised something other than a PrimenbError"
    if any(kind != "dir-as-file" for kind, _ in specials):
        assert "error" in done and not (root / "dest" / "trace.json").exists()
    if "trace" in done:
        assert _inside_path(done["trace"].final_checkpoint, root / "dest")


def _inside_path(path: Path | None, root: Path) -> bool:
    return path is None or Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))
