"""`%prime_serve` and `%prime_eval`: serve trained models over an OpenAI-compatible API and evaluate
them through it. The work is in `primenb.serve.verbs`; this only parses and shows."""

from __future__ import annotations

import shlex
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class

from primenb.errors import PrimenbError
from primenb.notebook.args import MagicUsageError, magic_help, magic_parser

SERVE_USAGE = magic_help("serve")
EVAL_USAGE = magic_help("eval")


@magics_class
class ServeMagics(Magics):
    @line_magic
    def prime_serve(self, line: str) -> Any:
        """Serve traces over an OpenAI-compatible API; add, remove, list and stop servers."""
        from primenb.notebook.magics import MagicFailed
        from primenb.serve.verbs import HANDLERS, split

        try:
            sub, rest = split(shlex.split(line))
            args = magic_parser("serve", sub).parse_line(shlex.join(rest))
            out = HANDLERS[sub](args)
        except (PrimenbError, MagicUsageError, ValueError) as exc:
            raise MagicFailed(str(exc)) from None
        if sub == "add":
            print("now serving " + ", ".join(out))
            return None
        if sub == "remove":
            print(f"removed {out}")
            return None
        if sub == "stop":
            print("stopped " + (", ".join(out) or "nothing"))
            return None
        return out

    @line_magic
    def prime_eval(self, line: str) -> Any:
        """Evaluate models and traces on an environment's held-out split through a served endpoint."""
        from primenb.notebook.magics import MagicFailed
        from primenb.serve.verbs import eval_run

        try:
            result = eval_run(magic_parser("eval", "eval").parse_line(line))
        except (PrimenbError, MagicUsageError) as exc:
            raise MagicFailed(str(exc)) from None
        try:
            from IPython.display import display

            display(result.chart())
        except ImportError:
            pass
        return result


ServeMagics.prime_serve.__doc__ = f"{ServeMagics.prime_serve.__doc__}\n\n{SERVE_USAGE}"
ServeMagics.prime_eval.__doc__ = f"{ServeMagics.prime_eval.__doc__}\n\n{EVAL_USAGE}"
