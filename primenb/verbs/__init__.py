"""Every verb's one handler, for both faces.

`primenb.commands` declares each command's typed arguments; `primenb.verbs.registry` pairs each
argument class with its handler here (``primenb.verbs.<family>.<name>``). A handler takes those
arguments and the `Face` that called it, does the work through the harness and the backends, and
returns a result object; the face only renders (a notebook displays what a magic returns, a
terminal prints its repr or JSON) and asks what only it can ask (a confirmation, a variable of
the user's namespace). The CLI and the magics are thin dispatchers over `registry.call`, each
with one error guard.

Cheap to import: the harness, the backends and pandas load when a handler runs.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


class Face(Protocol):
    """What a handler may ask of the face (terminal or notebook) that called it."""

    name: str  # primenb.commands.CLI or MAGIC

    def ref(self, token: str) -> Any:
        """A trace/run reference as typed (a notebook variable holding a Run or Trace stands for itself)."""

    def config(self, ref: str, mode: Any = None, *, lenient: bool = False) -> Config:
        """A validated config: a .toml path (in a notebook also a %%rltoml variable)."""

    def say(self, text: str) -> None:
        """A line for the user."""

    def warn(self, text: str) -> None:
        """Something to know before trusting a result (a `HarnessWarning`)."""

    def display(self, value: Any) -> None:
        """A result shown now, in full (a validation report, a fix)."""

    def name_problem(self, name: str) -> str | None:
        """Why the face cannot give a value this name (a notebook: a name of IPython's own)."""

    def bind(self, name: str, value: Any) -> None:
        """Give ``value`` a name the user can use next (a notebook variable)."""

    def offer(self, text: str) -> None:
        """Text for the user's next input (a notebook: the next cell)."""

    def follow(
        self, run: Run, *, new: bool = False, wait: bool = False, detach: bool = False, stop_on_interrupt: bool = False
    ) -> Any:
        """Follow ``run`` as the face does (monitor in a cell, progress in a terminal); ``new``: it
        was just launched and nothing said so yet. Each face reads its own options: a cell
        ``wait``s (blocks until the run ends), a terminal may ``detach`` (return at once) and
        ``stop_on_interrupt`` (Ctrl-C stops the run instead of detaching)."""

    def confirm(
        self, quote: Any, action: Callable[[], Run], *, what: str, wait: bool = False, detach: bool = False
    ) -> Any:
        """Ask before a billable ``action`` (shown ``quote``); run and follow it on yes."""

    def widget(self, kind: str, **options: Any) -> Any:
        """A face-only interactive view (``builder``, ``browser``); refused where there is none."""

    def figure(self, make: Callable[[], Any]) -> None:
        """A chart beside the result, where the face can show one (the terminal has the result's text)."""


@contextlib.contextmanager
def warnings_to(face: Face) -> Iterator[None]:
    """Hand the `HarnessWarning`s raised inside to ``face.warn`` (when the block ends); others pass on."""
    from primenb.harness.refine import HarnessWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, HarnessWarning):
            face.warn(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


class Table:
    """A listing: a DataFrame in a notebook (`frame`, the face's one render switch), aligned text
    columns in a terminal (`repr`), records with ``--json``."""

    def __init__(self, rows: list[dict[str, Any]], columns: list[str] | None = None, *, text: list[str] | None = None):
        self.rows = rows
        self.columns = columns or list(dict.fromkeys(k for r in rows for k in r))
        self.text_columns = text or self.columns

    def frame(self) -> Any:
        from primenb.render.listing import Listing  # ids and names whole: they are for copying

        return Listing(self.rows, columns=self.columns or None)

    def to_json(self) -> list[dict[str, Any]]:
        return self.rows

    def __repr__(self) -> str:
        cols = self.text_columns
        width = {c: min(60, max([len(c), *(len(str(r.get(c, ""))) for r in self.rows)])) for c in cols}
        lines = ["  ".join(c.ljust(width[c]) for c in cols).rstrip()]
        for r in self.rows:
            lines.append("  ".join(_cut(str(r.get(c, "")), width[c]).ljust(width[c]) for c in cols).rstrip())
        return "\n".join(lines)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def as_json(value: Any) -> str:
    """``--json`` output of a result: records for a table, the document of a card or spec."""
    import json

    if hasattr(value, "iloc"):  # a DataFrame
        return str(value.to_json(orient="records", date_format="iso", indent=1))
    if hasattr(value, "to_dict"):
        value = value.to_dict()
    elif hasattr(value, "to_json"):
        value = value.to_json()
    return json.dumps(value, indent=2)


__all__ = ["Face", "Table", "as_json", "warnings_to"]
