"""Which process of a distributed launch this is, from the variables torchrun sets (one process
when none is set)."""

from __future__ import annotations

import os


def rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)
