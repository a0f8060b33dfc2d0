"""Server extension tests: a real jupyter_server (pytest-jupyter) with primenb.server enabled, over
an isolated PRIME_HOME holding synthetic run directories (no training)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# pytest-jupyter's fixtures (and its async test runner) for this folder only: `pytest_plugins`
# is refused outside the top-level conftest, and there its autouse fixtures (a fake HOME and
# JUPYTER paths) would reach every other test.
from pytest_jupyter.jupyter_core import *  # noqa: F403
from pytest_jupyter.jupyter_server import *  # noqa: F403
from pytest_jupyter.pytest_tornasync import *  # noqa: F403


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    from traitlets.config import Config

    return Config({"ServerApp": {"jpserver_extensions": {"primenb.server": True}}})


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh PRIME_HOME with 12 synthetic completed traces (prefix ``s``) and one running run."""
    from tests.harness.synth import make_doc, write_runs

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    runs = tmp_path / "runs"
    write_runs(runs, 12, prefix="s")
    live = runs / "live-run"
    live.mkdir()
    doc = make_doc(99, prefix="live", status="running")
    doc["name"] = "live-run"
    doc["created"] = 1_800_000_000  # the newest
    doc["privacy"] = {"data_collection": "allow"}
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import write_trace

    write_trace(live, doc)
    assert index_trace(doc, live)
    (live / "status.json").write_text(json.dumps({"state": "running", "step": 3, "max_steps": 10, "backend": "local"}))
    with open(live / "metrics.jsonl", "w") as fh:
        for step in range(1, 4):
            fh.write(json.dumps({"step": step, "reward": step / 10, "loss": 1.0 / step}) + "\n")
        fh.write('{"step": 4, "rew')  # a writer mid-append: skipped
    with open(live / "samples.jsonl", "w") as fh:
        for step in range(1, 4):
            fh.write(
                json.dumps(
                    {
                        "step": step,
                        "prompt": "<b>p</b>",
                        "completion": f"<img src=x onerror=alert({step})>",
                        "reward": 0.5,
                    }
                )
                + "\n"
            )
    (live / "configs").mkdir()
    (live / "configs" / "config.toml").write_text('max_steps = 10\n[model]\nname = "primenb/tiny-byte"\n')
    yield tmp_path
