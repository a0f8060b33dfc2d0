"""The pre-save hook: a saved notebook keeps primenb's snapshots and drops widget views that could
not come back (no saved widget state), so reopening never shows "model not found"."""

from __future__ import annotations

import copy
from typing import Any

from primenb.server.snapshots import WIDGET_STATE, WIDGET_VIEW, keep_snapshots, pre_save_hook


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
