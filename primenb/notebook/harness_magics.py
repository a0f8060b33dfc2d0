"""`%prime_harness`: the traces of every run (show, apply, diff, compare, rerun)."""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class


@magics_class
class HarnessMagics(Magics):
    @line_magic
    def prime_harness(self, line: str) -> None:
        """%prime_harness show | apply | diff | compare | rerun | reindex"""
        from primenb.notebook.magics import MagicFailed

        raise MagicFailed("%prime_harness is not available yet")
