"""The trace views read a trace through its typed document (`Trace.typed`, a `TraceDoc`), not by
spelling keys again: a document that never went through the typed reader (a hand-made dict, a
hand edit) with parts of the wrong type degrades those cells, never the view (issue 43)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from primenb.protocol.documents import Steps, TraceDoc
from primenb.protocol.record import write_trace
from primenb.traces.comparison import Comparison, TraceDiff
from primenb.traces.trace import Trace, steps_text
from tests.harness.synth import make_doc

# every part a view reads, each of a type the trace document does not allow
WRONG_PARTS: dict[str, Any] = {
    "adapter": "lora",
    "final": ["step_10"],
    "steps": {"start": 0, "last": "12", "max": 30},
    "metrics": {"final_reward": "0.9", "final_loss": 0.25, "best_eval": 3, "final_eval": "x", "eval": 1},
    "model": "primenb/tiny-byte",
    "reproduction": "yes",
    "checkpoints": ["step_10"],
    "privacy": "deny",
    "data": {"train": {"hash": 7, "sources": "reverse-text"}},
    "seeds": [1, 2],
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    return tmp_path


def _bad_trace(run_dir: Path) -> Trace:
    run_dir.mkdir(parents=True, exist_ok=True)
    return Trace({**make_doc(1), **WRONG_PARTS}, run_dir)


def test_wrong_typed_parts_degrade_cells_not_the_views(home: Path) -> None:
    t = _bad_trace(home / "run")
    h = t.headline()
    assert h["name"] == "t-run-1" and h["fine-tune"] == "full" and h["model"] is None
    assert h["steps"] == "0 → not started (max 30)"  # the text "12" is no step
    assert h["final reward"] is None and h["final loss"] == 0.25
    assert h["final eval"] is None and h["best eval"] is None and h["final checkpoint"] is None
    assert t.final_checkpoint is None and t.last_step is None and t.fingerprint is None
    assert (t.model, t.data, t.summary) == ({}, {"train": {}}, {"final_loss": 0.25})
    page = t._repr_html_()
    assert "t-run-1" in page and "reproduces" not in page
    assert "<primenb Trace t00000001 t-run-1: completed>" in repr(t)


def test_views_read_the_typed_fields(home: Path) -> None:
    doc = {
        **make_doc(5),
        "final": {"step": 10, "path": "/ckpt/step_10", "kind": "adapter"},
        "reproduction": {"of": "t00000004", "metrics_match": True, "rows_compared": 10, "max_abs_diff": 0.0},
        "metrics": {"final_reward": 0.5, "final_loss": 0.1, "final_eval": {"key": "e", "value": 0.7, "step": 10}},
    }
    t = Trace(doc, home / "run")
    assert isinstance(t.typed, TraceDoc) and t.typed.steps == Steps(start=0, last=10, max=10)
    h = t.headline(live_step=4)
    assert h["fine-tune"].startswith("LoRA rank 5") and h["final checkpoint"] == "/ckpt/step_10"
    assert (h["final reward"], h["final loss"], h["final eval"]) == (0.5, 0.1, "0.7 at step 10")
    assert "rows compared" in t._repr_html_()


def test_a_new_document_retypes_the_trace(home: Path) -> None:
    run_dir = home / "run"
    run_dir.mkdir()
    write_trace(run_dir, make_doc(2))
    t = Trace.load(run_dir)
    write_trace(run_dir, {**make_doc(2), "name": "renamed", "steps": {"start": 0, "last": 3}})
    assert t.refresh().name == "renamed" and t.last_step == 3 and t.typed.name == "renamed"


def test_steps_text_reads_the_typed_steps() -> None:
    assert steps_text(Steps(start=0, last=30, max=30)) == "0 → 30 (max 30)"
    assert steps_text(Steps(start=0, max=60), live_step=12) == "0 → 12 so far (max 60)"
    assert steps_text(None) == "0 → not started"


def test_comparison_of_a_wrong_typed_trace(home: Path) -> None:
    good = Trace(make_doc(5), home / "a")
    bad = _bad_trace(home / "b")
    cmp = Comparison([good, bad])
    rows = cmp.summary_rows()
    assert rows[0]["final reward"] == 0.5 and rows[0]["steps"] == "0→10"
    assert rows[1]["final reward"] is None and rows[1]["steps"] == "0→None" and rows[1]["model"] is None
    diff = {(section, key): values for section, key, values in TraceDiff([good, bad]).rows}
    assert diff[("model", "id")][0] == "primenb/tiny-byte" and diff[("data", "train.hash")][1] != "7"
