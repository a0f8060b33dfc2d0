"""`wait_outputs_settled`, the wait the reopen tests use before asserting that no widget view
failed, waits for the failure when there is one: a notebook saved with a widget view and no
widget state shows "Loading widget..." first, "Error displaying widget: model not found" once the
kernel's widget manager has restored; the wait returns only after that. A notebook of static
outputs settles as it is, with no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.jupyterlab import (
    WIDGET_VIEW,
    chromium_page,
    jupyterlab,
    lab_env,
    open_notebook,
    require_ui,
    wait_outputs_settled,
)

pytestmark = pytest.mark.slow  # JupyterLab + Chromium

# the notebook in front: the workspace reopens the first page's notebook beside the second's
CURRENT = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  return {path: w.context.path, statics: w.node.querySelectorAll('.static-one').length, text: w.node.textContent};
}"""


def _notebook(path: Path, outputs: list[dict]) -> None:  # type: ignore[type-arg]
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("display_data", data=o)]) for o in outputs
    ]
    nbformat.write(nb, str(path))


def test_the_wait_reaches_a_widget_views_failure(tmp_path: Path) -> None:
    require_ui()
    env = {**lab_env(tmp_path, tmp_path / "home"), "JUPYTER_DATA_DIR": str(tmp_path / "data")}  # its own trust db
    with jupyterlab(tmp_path, tmp_path / "home", env=env) as lab:
        orphan = {WIDGET_VIEW: {"model_id": "0" * 32, "version_major": 2, "version_minor": 0}, "text/plain": "w"}
        _notebook(lab.root / "orphan.ipynb", [{"text/html": "<b class='static-orphan'>static</b>"}, orphan])
        _notebook(lab.root / "static.ipynb", [{"text/html": "<b class='static-one'>static</b>"}])
        for name in ("orphan.ipynb", "static.ipynb"):  # trusted, as a notebook the user saved is
            subprocess.run([sys.executable, "-m", "jupyter", "trust", str(lab.root / name)], env=env, check=True)
        with chromium_page() as page:
            open_notebook(page, lab, "orphan.ipynb")
            wait_outputs_settled(page)
            shown = page.evaluate(CURRENT)
            assert shown["path"] == "orphan.ipynb", shown["path"]
            assert "Error displaying widget" in shown["text"] and "Loading widget" not in shown["text"], shown["text"]
        with chromium_page() as page:
            open_notebook(page, lab, "static.ipynb")
            wait_outputs_settled(page)
            shown = page.evaluate(CURRENT)
            assert shown["path"] == "static.ipynb" and shown["statics"] == 1, shown
            assert "Error displaying widget" not in shown["text"]
