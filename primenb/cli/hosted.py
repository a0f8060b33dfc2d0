"""The terminal's question before a billable hosted launch (``--yes`` skips it)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from primenb.backends.modelfactory import Quote


def ask_in_terminal(quote: Quote) -> bool:
    print(quote.text(), flush=True)
    if not sys.stdin.isatty():
        print("stdin is not a terminal, so nobody can answer: pass --yes to launch", flush=True)
        return False
    try:
        answer = input("Launch this hosted run? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


__all__ = ["ask_in_terminal"]
