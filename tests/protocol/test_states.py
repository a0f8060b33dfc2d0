"""`State.UNKNOWN`: the one word for a run whose state cannot be read, typed everywhere it is
shown; and queries over the index name states through `status_in`, bound as parameters."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from primenb.protocol.documents import LIVE_STATES, STATES, State, read_status
from primenb.protocol.index import Index, index_trace, status_in
from primenb.protocol.record import write_trace
from primenb.render.phase import progress
from primenb.render.summary import headline
from primenb.run import Run
from primenb.traces.trace import Trace
from tests.harness.synth import make_doc


def test_unknown_is_a_state_no_run_records() -> None:
    assert State.UNKNOWN not in STATES and len(STATES) == 5
    assert State.of(None) is State.UNKNOWN and State.of("paused-by-a-newer-primenb") is State.UNKNOWN
    assert State.of(3) is State.UNKNOWN and State.of("running") is State.RUNNING
    assert not State.UNKNOWN.live and not State.UNKNOWN.final


@pytest.mark.parametrize(
    "status",
    [None, "{}", '{"state": "hibernating"}', '{"state": 7}', "not json"],
    ids=["no status.json", "no state", "a foreign state", "a number", "garbage"],
)
def test_a_run_without_a_readable_state_is_unknown_and_typed(tmp_path: Path, status: str | None) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "configs").mkdir()
    if status is not None:
        (run_dir / "status.json").write_text(status)
    alive = subprocess.Popen(["sleep", "60"])  # its process is alive: a dead one would make it failed
    try:
        run = Run(run_dir, process=alive)
        assert type(run.state) is State and run.state is State.UNKNOWN and not run.done
    finally:
        alive.kill()
        alive.wait()
    assert Run(run_dir).state is State.FAILED  # gone without a final state
    status_doc = read_status(run_dir / "status.json")
    assert headline(status_doc, [])["state"] is State.UNKNOWN
    for recorded in ({"trace_id": "t1"}, {"trace_id": "t1", "status": "hibernating"}):
        trace = Trace(recorded, run_dir)
        assert trace.state is None and trace.status == State.UNKNOWN == "unknown"


def test_progress_is_queued_before_any_state_and_unknown_for_a_foreign_one() -> None:
    assert progress({}).state is State.QUEUED
    assert progress({"state": "hibernating"}).state is State.UNKNOWN
    assert progress({"state": "running", "step": 2, "max_steps": 4}).state is State.RUNNING


def test_status_in_binds_state_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    for i, state in enumerate(["queued", "running", "completed", "failed", "stopped", "completed"]):
        run_dir = tmp_path / "runs" / f"r{i}"
        run_dir.mkdir(parents=True)
        doc = make_doc(i, status=state)
        write_trace(run_dir, doc)
        assert index_trace(doc, run_dir)

    def traces(states: list[str]) -> set[str]:
        cond, params = status_in(states)
        return {t for (t,) in Index().query(f"SELECT trace FROM traces WHERE {cond}", params)}

    assert traces(list(LIVE_STATES)) == {"t00000000", "t00000001"}
    assert traces([State.COMPLETED]) == {"t00000002", "t00000005"}
    assert traces([]) == set()
    assert traces(["completed') OR ('1'='1"]) == set()  # a value, never SQL
