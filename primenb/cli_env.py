"""`primenb env ...` in a terminal."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `primenb env` and its subcommands to the CLI parser."""
