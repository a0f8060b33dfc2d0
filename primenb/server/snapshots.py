"""Saved notebooks keep primenb's static snapshots, never a widget view that cannot come back.

Each primenb widget is displayed with its static HTML snapshot in the same output (marked
``metadata.primenb.snapshot``). A notebook saved while the kernel is alive would keep the widget
view too, and reopened later (after "Close and Shut Down Notebook", for instance: the kernel's
last display updates reach a page that no longer saves) JupyterLab prefers the view and shows
"Error displaying widget: model not found". This pre-save hook drops the view from such outputs
in the file written (the open page keeps its live widgets), unless the notebook saved that
widget's state, so the reopened notebook shows the snapshot.

A run monitor's snapshot is the HTML of the moment it was displayed ("queued"); its live view
moved on, and a kernel restart can leave it there for good (the view's last update never sent).
So a monitor's output also names its run's trace (``metadata.primenb.trace``), and the hook puts
the run's current static view in its place: its final summary once it ended, else the state
it is in at save time, never the "queued" of long ago.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from primenb.server.validate import TRACE_ID

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


Render = Callable[[str], "dict[str, Any] | None"]


def run_view(trace_id: str) -> dict[str, Any] | None:
    """The static view (text/html + text/plain) of the run the index records for ``trace_id``;
    None when the index or the run directory no longer knows it."""
    from primenb.protocol.record import read_trace
    from primenb.render.summary import run_html
    from primenb.run import Run
    from primenb.server.data import NotFound, run_dir_of

    try:
        run_dir = run_dir_of(trace_id)
    except (NotFound, OSError, ValueError):
        return None
    doc = read_trace(run_dir)
    if doc is None or doc.get("trace_id") != trace_id:
        return None
    run = Run(run_dir)
    return {"text/html": run_html(run), "text/plain": repr(run)}


def refresh_run_views(nb: dict[str, Any], render: Render = run_view) -> int:
    """Put each run monitor's current static view in its saved output; returns how many."""
    done = 0
    for cell in nb.get("cells") or []:
        for output in cell.get("outputs") or [] if isinstance(cell, dict) else []:
            data = output.get("data") if isinstance(output, dict) else None
            if not isinstance(data, dict) or not _is_snapshot(output):
                continue
            trace = output["metadata"]["primenb"].get("trace")
            # a notebook is anyone's file: only a plain trace id reaches the index (which alone
            # says where a run directory is)
            if not isinstance(trace, str) or not TRACE_ID.fullmatch(trace):
                continue
            view = None
            with contextlib.suppress(Exception):  # a broken run directory must never block a save
                view = render(trace)
            if view:
                data.update(view)
                done += 1
    return done


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


def notebook_folder(path: Any, contents_manager: Any) -> Path | None:
    """The folder of the notebook saved at API ``path`` under the server's root; None when the
    contents manager has no local root or the folder is not inside it."""
    root = getattr(contents_manager, "root_dir", None)
    if not isinstance(root, str) or not root or not isinstance(path, str):
        return None
    try:
        base = Path(root).resolve()
        folder = (base / PurePosixPath(path.strip("/")).parent).resolve()
    except (OSError, ValueError):
        return None
    return folder if folder.is_relative_to(base) else None


def pre_save_hook(model: dict[str, Any], path: Any = "", contents_manager: Any = None, **_: Any) -> None:
    """A jupyter_server ``ContentsManager`` pre-save hook. Run views show paths from the saved
    notebook's folder, as its kernel would: the server's working folder is its root."""
    from primenb.render.summary import paths_from

    if model.get("type") == "notebook" and isinstance(model.get("content"), dict):
        folder = notebook_folder(path, contents_manager)
        with paths_from(folder) if folder else contextlib.nullcontext():
            refresh_run_views(model["content"])
        keep_snapshots(model["content"])


__all__ = ["keep_snapshots", "notebook_folder", "pre_save_hook", "refresh_run_views", "run_view"]
