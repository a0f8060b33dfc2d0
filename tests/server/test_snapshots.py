"""The pre-save hook: a saved notebook keeps primenb's snapshots and drops widget views that could
not come back (no saved widget state), so reopening never shows "model not found"."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from primenb.server.snapshots import (
    WIDGET_STATE,
    WIDGET_VIEW,
    keep_snapshots,
    pre_save_hook,
    refresh_run_views,
    run_view,
)


def output(model_id: str, *, marked: bool = True, html: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {WIDGET_VIEW: {"model_id": model_id, "version_major": 2}, "text/plain": "x"}
    if html:
        data["text/html"] = '<div class="primenb-builder-static">snapshot</div>'
    meta = {"primenb": {"snapshot": True}} if marked else {}
    return {"output_type": "display_data", "data": data, "metadata": meta}


def notebook(*outputs: dict[str, Any], saved_state: tuple[str, ...] = ()) -> dict[str, Any]:
    nb: dict[str, Any] = {"cells": [{"cell_type": "code", "outputs": list(outputs)}], "metadata": {}}
    if saved_state:
        nb["metadata"]["widgets"] = {WIDGET_STATE: {"state": {m: {} for m in saved_state}}}
    return nb


def test_primenb_outputs_keep_only_their_snapshot() -> None:
    nb = notebook(output("a"), output("b"))
    assert keep_snapshots(nb) == 2
    for out in nb["cells"][0]["outputs"]:
        assert WIDGET_VIEW not in out["data"] and "primenb-builder-static" in out["data"]["text/html"]


def test_other_widgets_and_saved_widget_state_are_left_alone() -> None:
    nb = notebook(output("mine"), output("theirs", marked=False), output("nohtml", html=False), saved_state=("mine",))
    before = copy.deepcopy(nb)
    assert keep_snapshots(nb) == 0 and nb == before


def test_the_hook_takes_notebook_models_only_and_tolerates_odd_content() -> None:
    model = {"type": "notebook", "content": notebook(output("a"))}
    pre_save_hook(model, path="x.ipynb", contents_manager=None)
    assert WIDGET_VIEW not in model["content"]["cells"][0]["outputs"][0]["data"]
    pre_save_hook({"type": "file", "content": "text"}, path="x.txt")
    odd = {"cells": [None, {"outputs": [None, {"data": []}, {"data": {WIDGET_VIEW: 1, "text/html": ""}}]}]}
    assert keep_snapshots(odd) == 0


def monitor_output(trace: str | None, html: str = "<b>run3</b> queued") -> dict[str, Any]:
    mark: dict[str, Any] = {"snapshot": True, **({"trace": trace} if trace else {})}
    data = {WIDGET_VIEW: {"model_id": "m"}, "text/html": html, "text/plain": "Run(run3, queued)"}
    return {"output_type": "display_data", "data": data, "metadata": {"primenb": mark}}


def test_a_monitor_saves_its_runs_view_as_of_the_save_not_its_queued_start() -> None:
    """A kernel restart during the warm-up, `--attach` in a new cell, the run completes, save:
    the original cell's output had kept the "queued" of its first display. Saved now, each
    monitor output names its trace and gets the run's view as of the save."""
    nb = notebook(monitor_output("trace-1"), monitor_output(None), monitor_output("gone"), output("b"))
    views = {"trace-1": {"text/html": "<b>run3</b> completed at step 30/30", "text/plain": "Run(run3, completed)"}}
    assert refresh_run_views(nb, views.get) == 1
    first, untraced, gone, builder = nb["cells"][0]["outputs"]
    assert first["data"]["text/html"] == "<b>run3</b> completed at step 30/30"
    assert first["data"]["text/plain"] == "Run(run3, completed)"
    assert untraced["data"]["text/html"] == gone["data"]["text/html"] == "<b>run3</b> queued"  # nothing known
    assert "primenb-builder-static" in builder["data"]["text/html"]

    def broken(trace: str) -> dict[str, Any] | None:
        raise OSError("the run directory went away mid-read")

    assert refresh_run_views(notebook(monitor_output("trace-1")), broken) == 0  # the save goes on
    asked: list[str] = []
    hostile = notebook(monitor_output("../../etc"), monitor_output("x" * 65), monitor_output("t 1"))
    assert refresh_run_views(hostile, lambda t: asked.append(t) or None) == 0 and asked == []


def test_run_view_reads_the_indexed_run(home: Path) -> None:
    """The hook's renderer: the index's run directory for the trace, rendered as the monitor's
    static summary would be; an unknown trace renders nothing."""
    from primenb.protocol.index import Index

    ((trace, run_dir),) = Index().query("SELECT trace, run_dir FROM traces WHERE name = 'live-run'")
    view = run_view(trace)
    assert view is not None and "running" in view["text/html"] and "step 3/10" in view["text/html"]
    assert str(run_dir) not in view["text/html"]  # no absolute path in a saved notebook
    assert run_view("no-such-trace") is None


def test_a_run_view_saved_by_the_server_shows_paths_from_the_notebooks_folder(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server (working folder: its root) saves a notebook in a subfolder after a kernel
    restart: the run's folder shows relative to the notebook, as its kernel showed it, not to the
    server's root ("runs/live-run")."""
    from types import SimpleNamespace

    from primenb.protocol.index import Index

    ((trace,),) = Index().query("SELECT trace FROM traces WHERE name = 'live-run'")
    monkeypatch.chdir(tmp_path)  # the Jupyter server's root, where the server runs
    manager = SimpleNamespace(root_dir=str(tmp_path))
    model = {"type": "notebook", "content": notebook(monitor_output(trace))}
    pre_save_hook(model, path="runs/train.ipynb", contents_manager=manager)
    saved = model["content"]["cells"][0]["outputs"][0]["data"]["text/html"]
    assert ">live-run</div>" in saved and "runs/live-run" not in saved, saved[-300:]
    # a notebook at the root, or a path that leaves it: from the root
    for path in ("train.ipynb", "../../elsewhere/train.ipynb"):
        model = {"type": "notebook", "content": notebook(monitor_output(trace))}
        pre_save_hook(model, path=path, contents_manager=manager)
        assert ">runs/live-run</div>" in model["content"]["cells"][0]["outputs"][0]["data"]["text/html"]
