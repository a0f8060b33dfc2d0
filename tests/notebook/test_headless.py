"""A run's cell ends as its summary however the notebook is executed: here headless, by nbclient
(what papermill and ``nbconvert --execute`` use), with the non-``--wait`` pattern, the launch in
one cell and ``run.wait()`` in a later one. nbclient records only the messages of the cell it is
running, so the summary must reach the launch cell's output from the later cell (a display update
through the same display id), not only from the monitor's thread."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.tiny import sft_toml

pytestmark = pytest.mark.slow  # a real kernel and a real (tiny) run

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
CONFIG = sft_toml(steps=2, model="primenb/tiny-byte-xs", batch_size=4, micro_batch_size=4, seq_len=48)


def test_launch_then_wait_in_a_later_cell_saves_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    cells = ["%load_ext primenb", f"%%rltoml cfg\n{CONFIG}", "run = %prime_train cfg --name headless", "run.wait()"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    try:
        client.execute()
    finally:
        from primenb.run import Run

        for run_dir in (tmp_path / "outputs").glob("*"):
            Run(run_dir).stop(timeout=60)
    saved = tmp_path / "headless.ipynb"
    nbformat.write(nb, saved)

    assert "'completed'" in str(nb.cells[3].outputs), nb.cells[3].outputs
    launch = [o for o in nb.cells[2].outputs if o.get("data")]
    assert len(launch) == 1, nb.cells[2].outputs  # one display: the monitor, now its summary
    data = launch[0]["data"]
    assert WIDGET_VIEW not in data, data.keys()
    assert 'data-state="completed"' in data["text/html"], data["text/html"][:500]
    assert "starting the engine process" not in data["text/html"] and "completed" in data["text/plain"]
    assert os.fspath(tmp_path) not in saved.read_text()
