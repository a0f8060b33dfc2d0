"""Saved notebooks keep primenb's static snapshots, never a widget view that cannot come back.

Each primenb widget is displayed with its static HTML snapshot in the same output (marked
``metadata.primenb.snapshot``). A notebook saved while the kernel is alive would keep the widget
view too, and reopened later (after "Close and Shut Down Notebook", for instance: the kernel's
last display updates reach a page that no longer saves) JupyterLab prefers the view and shows
"Error displaying widget: model not found". This pre-save hook drops the view from such outputs
in the file written (the open page keeps its live widgets), unless the notebook saved that
widget's state, so the reopened notebook shows the snapshot.
"""

from __future__ import annotations

from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def _saved_widget_ids(nb: dict[str, Any]) -> set[str]:
    widgets = (nb.get("metadata") or {}).get("widgets") or {}
    state = (widgets.get(WIDGET_STATE) or {}).get("state") if isinstance(widgets, dict) else None
    return set(state) if isinstance(state, dict) else set()


def _is_snapshot(output: dict[str, Any]) -> bool:
    meta = output.get("metadata")
    mark = meta.get("primenb") if isinstance(meta, dict) else None
    return isinstance(mark, dict) and mark.get("snapshot") is True


def keep_snapshots(nb: dict[str, Any]) -> int:
    """Drop the widget view from primenb's outputs whose widget state is not saved; returns how many."""
    kept = _saved_widget_ids(nb)
    dropped = 0
    for cell in nb.get("cells") or []:
        for output in cell.get("outputs") or [] if isinstance(cell, dict) else []:
            data = output.get("data") if isinstance(output, dict) else None
            if not isinstance(data, dict) or WIDGET_VIEW not in data or "text/html" not in data:
                continue
            view = data[WIDGET_VIEW]
            if _is_snapshot(output) and not (isinstance(view, dict) and view.get("model_id") in kept):
                del data[WIDGET_VIEW]
                dropped += 1
    return dropped


def pre_save_hook(model: dict[str, Any], **_: Any) -> None:
    """A jupyter_server ``ContentsManager`` pre-save hook."""
    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        keep_snapshots(model["content"])


__all__ = ["keep_snapshots", "pre_save_hook"]
