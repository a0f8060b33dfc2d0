"""Static fallbacks for widgets in saved notebooks.

A widget output saved without its widget state reopens as "Error displaying widget: model not
found". Each widget here is displayed with a display id, its live view *and* a static HTML snapshot
in the same bundle (nbconvert, GitHub and VS Code pick the HTML). When the widget is closed, or the
kernel is asked to shut down, the display is replaced in place by the HTML alone, so a notebook
saved afterwards shows a readable snapshot instead of the error.
"""

from __future__ import annotations

import atexit
import contextlib
import weakref
from collections.abc import Callable
from typing import Any

from IPython import get_ipython
from IPython.display import display

Bundle = dict[str, Any]
# marks an output as a widget view with its snapshot: a saved notebook keeps the snapshot only
# (primenb/server/snapshots.py drops the view when the notebook is saved)
SNAPSHOT_METADATA = {"primenb": {"snapshot": True}}

# display id -> (handle, the widget whose view it shows, the function giving its static bundle)
_LIVE: dict[str, tuple[Any, Any, Callable[[], Bundle]]] = {}
# objects that turn their own display static with `finish()` (the live monitor)
_FINISHERS: weakref.WeakSet[Any] = weakref.WeakSet()
_HOOKED: weakref.WeakSet[Any] = weakref.WeakSet()


def live_bundle(widget: Any, static: Bundle) -> Bundle:
    """The widget's view plus the static HTML/text, one bundle (what `display(raw=True)` takes)."""
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    return {**static, **data}


def show(widget: Any, static: Callable[[], Bundle]) -> Any:
    """Display ``widget`` with its static fallback; returns the display handle."""
    handle = display(live_bundle(widget, static()), raw=True, display_id=True, metadata=SNAPSHOT_METADATA)
    if handle is not None:
        _LIVE[handle.display_id] = (handle, widget, static)
        _hook_shutdown()
    return handle


def freeze(handle: Any) -> None:
    """Replace one live display by its static snapshot (the widget view is dropped)."""
    entry = _LIVE.pop(getattr(handle, "display_id", ""), None)
    if entry is not None:
        handle, _, static = entry
        handle.update(static(), raw=True)


def finish_on_shutdown(obj: Any) -> None:
    """Call ``obj.finish()`` when the kernel shuts down, unless `finished(obj)` came first."""
    _FINISHERS.add(obj)
    _hook_shutdown()


def finished(obj: Any) -> None:
    _FINISHERS.discard(obj)


def freeze_all() -> int:
    """Freeze every live display (kernel shutdown); returns how many were frozen."""
    n = 0
    for obj in list(_FINISHERS):
        with contextlib.suppress(Exception):  # one failed snapshot must not keep the others live
            obj.finish()
            n += 1
        _FINISHERS.discard(obj)
    for handle, _, _ in list(_LIVE.values()):
        freeze(handle)
        n += 1
    return n


def _hook_shutdown() -> None:
    """Wrap the kernel's `do_shutdown` once: the displays are frozen while IOPub still works.
    An `atexit` handler is the last resort (it runs after the kernel stopped sending)."""
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None or kernel in _HOOKED:
        return
    original = kernel.do_shutdown

    def do_shutdown(*args: Any, **kwargs: Any) -> Any:
        with contextlib.suppress(Exception):  # a failed snapshot must never block a shutdown
            freeze_all()
        return original(*args, **kwargs)

    kernel.do_shutdown = do_shutdown
    _HOOKED.add(kernel)
    atexit.register(freeze_all)


__all__ = ["SNAPSHOT_METADATA", "finish_on_shutdown", "finished", "freeze", "freeze_all", "live_bundle", "show"]
