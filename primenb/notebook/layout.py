"""Rows of widgets that fit a narrow notebook (900 px and less): they wrap instead of squeezing
their children, and buttons keep their labels (ipywidgets gives a button a fixed width and hides
what does not fit, so a squeezed "Compare" became a bare icon)."""

from __future__ import annotations

from typing import Any

import ipywidgets as W


def keep_label(*buttons: W.Button) -> None:
    """A button as wide as its label (plus icon), never shrunk below it."""
    for button in buttons:
        button.layout.width = button.layout.width or "auto"
        button.layout.min_width = "max-content"
        button.layout.flex = "0 0 auto"


def wrapping_row(children: list[Any], **layout: Any) -> W.HBox:
    """An HBox whose children wrap to the next line when the row is too narrow; its buttons keep
    their labels."""
    keep_label(*(c for c in children if isinstance(c, W.Button)))
    return W.HBox(children, layout=W.Layout(**{"flex_flow": "row wrap", "align_items": "center", **layout}))


__all__ = ["keep_label", "wrapping_row"]
