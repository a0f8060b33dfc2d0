"""The message line of a form widget: what its buttons and fields report, never a traceback."""

from __future__ import annotations

import html
from typing import Any

from primenb.errors import PrimenbError
from primenb.render.svgchart import ERROR as RED  # the one palette
from primenb.render.svgchart import OK as GREEN


class Feedback:
    """Mixed into a widget with a ``message`` (an ``ipywidgets.HTML``)."""

    message: Any

    def _say(self, text: str, *, error: bool = False) -> None:
        """Show ``text`` (already HTML) in the message line."""
        self.message.value = f'<span style="color:{RED if error else GREEN}">{text}</span>'

    def _guard(self, fn: Any, *args: Any) -> Any:
        """Button and field callbacks: a user error becomes a message, never a traceback."""
        try:
            return fn(*args)
        except PrimenbError as exc:
            self._say(html.escape(str(exc)), error=True)
            return None
