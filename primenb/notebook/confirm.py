"""The question before a billable hosted launch, as a widget: the quote, Launch and Cancel.

A cell cannot block on a button (the kernel handles the click after the cell ends), so the magic
shows this widget and returns; the click runs the launch and shows the run's monitor inside it.
`pending()` lists the widgets still waiting, so a later cell (or a test) can answer with
``pending()[-1].launch_button.click()``.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from IPython.display import display

from primenb.errors import PrimenbError

if TYPE_CHECKING:
    from primenb.backends.modelfactory import Quote
    from primenb.run import Run

_PENDING: list[LaunchConfirm] = []


def pending() -> list[LaunchConfirm]:
    """The confirmations shown in this kernel that nobody answered yet (oldest first)."""
    return [c for c in _PENDING if c.answer is None]


class LaunchConfirm:
    """Quote + Launch/Cancel; Launch calls ``action`` once and shows the run it returns."""

    def __init__(self, quote: Quote, action: Callable[[], Run], *, what: str = "Launch") -> None:
        import ipywidgets as W

        self.quote = quote
        self.action = action
        self.run: Run | None = None
        self.answer: str | None = None
        self.error: str | None = None
        self.text = W.HTML(f"<b>{html.escape(quote.text())}</b>")
        self.launch_button = W.Button(description=f"{what} (billed)", button_style="warning", icon="rocket")
        self.cancel_button = W.Button(description="Cancel")
        self.out = W.Output()
        self.launch_button.on_click(lambda _b: self._launch())
        self.cancel_button.on_click(lambda _b: self._cancel())
        self.widget = W.VBox([self.text, W.HBox([self.launch_button, self.cancel_button]), self.out])
        _PENDING.append(self)

    def _repr_mimebundle_(self, **kw: Any) -> Any:
        bundle = self.widget._repr_mimebundle_(**kw)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        return {**data, "text/plain": f"{self.quote.text()}\n(answer with the Launch or Cancel button)"}

    def _done(self, answer: str) -> bool:
        if self.answer is not None:
            return False  # a second click does nothing: one launch per question
        self.answer = answer
        self.launch_button.disabled = self.cancel_button.disabled = True
        return True

    def _cancel(self) -> None:
        if self._done("cancelled"):
            self.text.value += "<br>not launched (cancelled)"

    def _launch(self) -> None:
        if not self._done("launched"):
            return
        from primenb.notebook.monitor import show_monitor

        with self.out:
            try:
                self.run = self.action()
            except PrimenbError as exc:
                self.error = str(exc)
                report = getattr(exc, "report", None)
                if report is not None:
                    display(report)
                print(f"not launched: {exc}")
                return
            show_monitor(self.run)


__all__ = ["LaunchConfirm", "pending"]
