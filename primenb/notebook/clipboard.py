"""A one-purpose anywidget: copy a text to the browser's clipboard when Python asks.

The kernel cannot reach the clipboard; the page can (on https or localhost). Each `copy(text)`
bumps a counter the view watches, so copying the same text twice still copies.
"""

from __future__ import annotations

import anywidget
import traitlets

_ESM = """
function render({ model, el }) {
  el.style.display = "none";
  model.on("change:nonce", async () => {
    try {
      await navigator.clipboard.writeText(model.get("text"));
      model.set("copied", model.get("nonce"));
    } catch (err) {
      model.set("copied", -1);  // no clipboard here (plain http, or denied): the text stays shown
    }
    model.save_changes();
  });
}
export default { render };
"""


class Clipboard(anywidget.AnyWidget):
    _esm = traitlets.Unicode(_ESM).tag(sync=True)
    text = traitlets.Unicode("").tag(sync=True)
    nonce = traitlets.Int(0).tag(sync=True)
    copied = traitlets.Int(0).tag(sync=True)  # the nonce last copied; -1 when the page could not

    def copy(self, text: str) -> None:
        self.text = text
        self.nonce += 1


__all__ = ["Clipboard"]
