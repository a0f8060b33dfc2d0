"""The status readers read ``status.json`` through its typed document (`StatusDoc`), not by
spelling keys again (issue 43): a wrong-typed field is unknown, never a value of another kind."""

from __future__ import annotations

from primenb.protocol.documents import State, StatusDoc, parse
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
