"""argparse for magics: usage errors become short messages, never `SystemExit`."""

from __future__ import annotations

import argparse
import shlex

from primenb.errors import PrimenbError


class MagicUsageError(PrimenbError):
    pass


class MagicParser(argparse.ArgumentParser):
    def __init__(self, prog: str, **kw: object) -> None:
        super().__init__(prog=prog, add_help=False, exit_on_error=False, **kw)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        raise MagicUsageError(f"{message}\nusage: {self.format_usage().removeprefix('usage: ').strip()}")

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
