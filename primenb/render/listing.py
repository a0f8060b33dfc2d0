"""A listing's DataFrame in a cell: every cell printed whole.

pandas cuts a notebook cell's text at 50 characters (``display.max_colwidth``), and a listing's
cells are what a person copies into the next command: a served adapter's id, a trace's name, a
run folder. Cut, they are wrong the moment they are pasted."""

from __future__ import annotations

from typing import Any

import pandas as pd


class Listing(pd.DataFrame):
    """A DataFrame (every method, and slices are plain DataFrames) whose own view cuts no cell."""

    def _repr_html_(self) -> Any:
        with pd.option_context("display.max_colwidth", None):
            return super()._repr_html_()

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            return super().__repr__()


__all__ = ["Listing"]
