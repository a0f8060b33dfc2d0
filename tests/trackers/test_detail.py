"""The sidebar's detail answer carries where each tracker run lives (trace.json ``trackers``), as
data: the sidebar (labextension/src/extras.ts ``trackerLinks``) links http(s) URLs only."""

from __future__ import annotations

from pathlib import Path

import pytest

from primenb.protocol.index import index_trace
from primenb.protocol.record import write_trace
from tests.harness.synth import make_doc


def test_the_detail_answer_holds_the_trace_trackers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.server import data

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    where = {
        "wandb": {"url": "https://wandb.ai/me/p/runs/abc", "run_id": "abc"},
        "mlflow": {"uri": "file:///runs/x/trackers/mlflow", "run_id": "r1"},
        "evil": {"url": "javascript:alert(1)"},  # passed on as data; the sidebar shows it as text
    }
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    doc = {**make_doc(1), "trackers": where}
    write_trace(run_dir, doc)
    assert index_trace(doc, run_dir)
    assert data.trace_detail(doc["trace_id"])["trackers"] == where

    plain = tmp_path / "plain"
    plain.mkdir()
    write_trace(plain, make_doc(2))
    assert index_trace(make_doc(2), plain)
    assert data.trace_detail(make_doc(2)["trace_id"]).get("trackers") is None  # no trackers: no section
