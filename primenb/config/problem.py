"""What a cross-field check reports: a problem at a path of the config."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from primenb.config.positions import Path


@dataclass
class Problem:
    path: Path
    message: str
    hint: str = ""
    code: str = "rule"
    severity: str = "error"


# Each check reads a few fields and may yield problems. They run one by one, so when a config
# has schema errors a check whose inputs are invalid is skipped alone (`primenb.config.salvage`).
Check = Callable[[Any], Iterator[Problem]]

__all__ = ["Check", "Problem"]
