"""Incremental readers of a run's JSONL files: each call returns only rows appended since the last.

The reader itself lives with the one safe reader (`primenb.protocol.reader.JsonlTail`).
"""

from __future__ import annotations

from primenb.protocol.reader import JsonlTail

__all__ = ["JsonlTail"]
