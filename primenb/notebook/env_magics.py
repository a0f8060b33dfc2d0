"""`%prime_env`: the environments (tasks + reward functions) runs train against."""

from __future__ import annotations

from IPython.core.magic import Magics, line_magic, magics_class


@magics_class
class EnvMagics(Magics):
    @line_magic
    def prime_env(self, line: str) -> None:
        """%prime_env list | add PATH_OR_MODULE [--id ID] | show ID | remove ID"""
        from primenb.notebook.magics import MagicFailed

        raise MagicFailed("%prime_env is not available yet")
