"""The status readers read ``status.json`` through its typed document (`StatusDoc`), not by
spelling keys again (issue 43): a wrong-typed field is unknown, never a value of another kind."""

from __future__ import annotations

from pathlib import Path

from primenb.protocol.documents import State, StatusDoc, parse, typed
from primenb.render.phase import phase_line, progress

RUNNING = {"state": "running", "phase": "training", "mode": "rl", "step": 3, "max_steps": 10}


def test_progress_reads_the_typed_status() -> None:
    doc = StatusDoc.model_validate(RUNNING)
    p = progress(doc)
    assert (p.state, p.phase, p.label, p.step, p.total) == (State.RUNNING, "training", "training (GRPO)", 3, 10)
    assert progress(doc) == progress(RUNNING) == progress(parse(StatusDoc, RUNNING) or {})


def test_a_wrong_typed_field_is_unknown_not_a_value() -> None:
    """A phase that is a number is no phase (the run is training, as its step says), not a phase
    named ``7``; a mode that is a list names no mode; a state of the wrong type is unknown."""
    p = progress({**RUNNING, "phase": 7, "mode": ["rl"], "step_plan": "lots"})
    assert (p.phase, p.label, p.step, p.total) == ("training", "training", 3, 10)
    assert phase_line(p) == "training · step 3/10"
    # as before: a state this primenb does not know is unknown, no state at all is queued
    assert progress({**RUNNING, "state": "paused"}).state is State.UNKNOWN
    assert progress({**RUNNING, "state": 5}).state is State.UNKNOWN
    assert progress({"phase": "training"}).state is State.QUEUED


def test_the_summary_reads_the_typed_status(tmp_path: Path) -> None:
    """The run summary's headline, ending and warnings take the typed document the readers
    return, and read its fields: an error that is not text is no error line."""
    from primenb.render.summary import ending, headline, status_warnings
    from primenb.run import Run

    run = Run(tmp_path / "run")
    ended = {
        "state": "completed",
        "step": 10,
        "max_steps": 10,
        "wall_s": 65,
        "trace_id": "abc123",
        "final_checkpoint": "ckpt/step_10",
        "warnings": ["tracker wandb: offline", 3],
    }
    doc = typed(StatusDoc, ended)
    e = ending(run, doc, rows=[])
    assert (e.state, e.step, e.max_steps, e.wall_s, e.trace_id) == (State.COMPLETED, 10, 10, 65.0, "abc123")
    assert e.next_commands and e.next_commands[0] == "%prime_harness apply abc123 --steps 10"
    assert headline(doc, [{"step": 9, "loss": 0.5}])["state"] is State.COMPLETED
    assert status_warnings(doc) == status_warnings(ended) == ["tracker wandb: offline"]
    assert ending(run, {**ended, "error": ["boom"]}, rows=[]).error == ""


def test_a_remote_backends_note_is_read_from_the_typed_status() -> None:
    """``note`` is not a declared status field (a remote backend's one line): it is read from the
    document's undeclared fields, by one function the summary and the monitor share."""
    from primenb.render.summary import status_note

    assert status_note(typed(StatusDoc, {**RUNNING, "note": "queue position 3"})) == "queue position 3"
    assert status_note(typed(StatusDoc, RUNNING)) == ""
