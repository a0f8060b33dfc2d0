"""The first thing a launch shows: one line, displayed the moment the run's process exists.

The live monitor needs ipywidgets and a few dozen widget models (about a second in a cold kernel
under load, see docs/widgets.md "Launch timings"); this line needs neither, so the cell answers
at once, and the monitor then takes the same display's place (its ``display_id``). Kept free of
heavy imports on purpose: it runs before them.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from IPython import get_ipython
from IPython.display import display

if TYPE_CHECKING:
    from primenb.run import Run


def starting_text(name: str, pid: int | None) -> str:
    process = f"process {pid}, " if pid else ""
    return f"starting: {name} ({process}waiting for the first step…)"


def starting_bundle(run: Run) -> dict[str, Any]:
    pid = (run.launcher or {}).get("pid")
    text = starting_text(run.name, pid if isinstance(pid, int) and not isinstance(pid, bool) else None)
    return {
        "text/html": f'<div class="primenb-starting" style="color:var(--jp-ui-font-color1, #212121)">'
        f"{html.escape(text)}</div>",
        "text/plain": text,
    }


def show_starting(run: Run) -> Any:
    """Display the starting line; returns its display handle (for the monitor to update), or None
    outside a kernel (a terminal would print the line, then the monitor's text again)."""
    if getattr(get_ipython(), "kernel", None) is None:
        return None
    return display(starting_bundle(run), raw=True, display_id=True)


__all__ = ["show_starting", "starting_bundle", "starting_text"]
