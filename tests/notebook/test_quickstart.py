"""The quickstart notebook, executed headless by a real Jupyter kernel (as nbconvert/CI would)."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from ..conftest import ROOT

pytestmark = pytest.mark.slow  # trains real (tiny) models in subprocesses


def test_quickstart_notebook_runs_and_learns(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    path = tmp_path / "quickstart.ipynb"
    shutil.copy(ROOT / "notebooks" / "quickstart.ipynb", path)
    nb = nbformat.read(path, as_version=4)
    try:
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:  # a run outlives its kernel by design: stop it if the notebook did not finish
        from primenb.run import Run

        for run_dir in (tmp_path / "outputs").glob("*"):
            Run(run_dir).stop(timeout=60)

    outputs = {i: cell.get("outputs", []) for i, cell in enumerate(nb.cells) if cell.cell_type == "code"}
    errors = [o for outs in outputs.values() for o in outs if o.output_type == "error"]
    assert not errors, errors
    assert (tmp_path / "rl.toml").exists()

    train_cell = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "%prime_train" in c.source)
    bundles = [o["data"] for o in outputs[train_cell] if "data" in o]
    # with --wait the live widget was replaced in place by the static summary before the cell ended:
    # no widget mime type left for a reopened notebook to fail on, no absolute path
    assert bundles and not any("application/vnd.jupyter.widget-view+json" in b for b in bundles)
    summary = bundles[0]["text/html"]
    assert "completed at step 100/100" in summary and "<svg" in summary and str(tmp_path) not in summary

    final_view = nb.cells[-1].outputs[0]["data"]
    assert "completed" in final_view["text/html"] and "<svg" in final_view["text/html"]

    from primenb.run import Run

    run = Run(tmp_path / "outputs" / "quickstart")
    evals = [r for r in run.metric_rows() if "eval/reverse-text/reward" in r]
    warm = [r for r in run.metric_rows() if "warmup/eval/reverse-text/reward" in r]
    assert warm[0]["warmup/eval/reverse-text/reward"] < 0.2  # random init
    assert evals[-1]["eval/reverse-text/reward"] > 0.8  # learned
