"""Reading TOML the way upstream's install reads it: TOML 1.1, through tomli >= 2.4.

prime-rl-configs 0.4.0 asks for `tomli>=2.2.1`, and pip installs the newest tomli (2.4 and later
read TOML 1.1: newlines and trailing commas in inline tables, `\\e` and `\\xHH` escapes, times
without seconds). Python 3.11-3.14's `tomllib` reads TOML 1.0 and calls those syntax errors, so
every config read here goes through this one function, whatever the Python.
tomlkit (the round-trip editor behind `--fix`, comments kept) reads TOML 1.1 from 0.15 on.
"""

from __future__ import annotations

from typing import Any

import tomli

TOMLDecodeError = tomli.TOMLDecodeError
TOML_VERSION = "1.1.0"


def read_toml(text: str) -> dict[str, Any]:
    """The document's data, as upstream's loader reads it; raises `TOMLDecodeError`."""
    return tomli.loads(text)


__all__ = ["TOML_VERSION", "TOMLDecodeError", "read_toml"]
