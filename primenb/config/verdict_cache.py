"""Answers kept per machine under `PRIME_HOME/cache/<kind>/`, keyed by everything they depend on.

Two parts of validation cost seconds on a cold process while their answer rarely changes:
checking env/renderer tables imports verifiers, and suggesting environment ids scans every
installed distribution's metadata. Each keeps its answer here, keyed by its exact inputs and the
versions (or install state) it depends on, so the same question gets the same answer without the
cost. An unreadable or absent entry is computed again; a read-only home only means nothing is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

SCHEME = 1  # bump when a kept answer's shape or meaning changes


def versions(*dists: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in dists:
        try:
            out.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            out.append(f"{dist}=-")
    return ",".join(out)


def install_state() -> list[Any]:
    """sys.path and its folders' modification times: installing or removing a package changes them."""
    state: list[Any] = []
    for entry in sys.path:
        try:
            state.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            state.append([entry, None])
    return state


def key(*parts: Any) -> str | None:
    try:
        text = json.dumps([SCHEME, *parts], sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _folder(kind: str) -> Path:
    from primenb.home import prime_home

    return prime_home() / "cache" / kind


def read(kind: str, name: str | None) -> Any:
    """The kept answer, or None when there is none (or it cannot be read)."""
    if name is None:
        return None
    try:
        return json.loads((_folder(kind) / f"{name}.json").read_text())
    except (OSError, ValueError):
        return None


def write(kind: str, name: str | None, answer: Any) -> None:
    if name is None:
        return
    try:
        folder = _folder(kind)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(answer))
        os.replace(tmp, folder / f"{name}.json")  # atomic: a concurrent reader sees all or nothing
    except OSError:
        pass
