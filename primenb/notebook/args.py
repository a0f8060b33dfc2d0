"""argparse for magics: usage errors become short messages, never `SystemExit`; `MagicFailed`
ends a cell with its message and no traceback."""

from __future__ import annotations

import argparse
import shlex
from typing import Any, NoReturn

from primenb.commands import MAGIC, add_arguments, command, did_you_mean, help_text, invocation
from primenb.errors import PrimenbError


class MagicUsageError(PrimenbError):
    pass


class MagicFailed(PrimenbError):
    """Ends a cell (so "Run all" stops) after its problem was displayed; no Python traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31m{self}\x1b[0m"]


class MagicParser(argparse.ArgumentParser):
    def __init__(self, prog: str, **kw: Any) -> None:
        super().__init__(prog=prog, add_help=False, exit_on_error=False, **kw)

    def error(self, message: str) -> NoReturn:
        raise MagicUsageError(
            f"{message}{self._did_you_mean(message)}\nusage: {self.format_usage().removeprefix('usage: ').strip()}"
        )

    def _did_you_mean(self, message: str) -> str:
        if not message.startswith("unrecognized arguments:"):
            return ""
        return did_you_mean(self, message.removeprefix("unrecognized arguments:").split())

    def parse_line(self, line: str) -> argparse.Namespace:
        try:
            words = shlex.split(line)
        except ValueError as exc:  # an unbalanced quote: `%prime_train cfg --name "x`
            raise MagicUsageError(f"cannot read the arguments ({exc})") from None
        try:
            return self.parse_args(words)
        except argparse.ArgumentError as exc:
            self.error(str(exc))
            raise  # unreachable: error() raises


def magic_parser(family_name: str, name: str) -> MagicParser:
    """The parser of one magic (sub)command, built from its declaration in `primenb.commands`."""
    cmd = command(family_name, name)
    parser = MagicParser(invocation(cmd, MAGIC))
    add_arguments(parser, cmd, MAGIC)
    return parser


def magic_help(family_name: str, skip: tuple[str, ...] = ()) -> str:
    """The usage of a magic's subcommands (shown by `%magic?` and on a usage error)."""
    return help_text(family_name, MAGIC, skip)
