"""`primenb harness ...` in a terminal."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `primenb harness` and its subcommands to the CLI parser."""
