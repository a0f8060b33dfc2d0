"""The environment registry on disk: ``$PRIME_HOME/environments/<id>.json``, one file per id.

Each file records where the environment's code is (a local folder or ``.py`` file, or an
importable module), and what it looked like when it was added (version, description, reward
functions, arguments), so listing and config validation need not import anything. Files are
written atomically; a file that cannot be read is skipped (and reported by `problems`), never
deleted.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from primenb.envs.errors import RegistryError

log = logging.getLogger("primenb.envs")

ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
KINDS = ("path", "module")


@dataclass
class Entry:
    """One registered environment."""

    id: str
    kind: str  # "path" (a local folder / .py file) | "module" (an importable module)
    target: str  # absolute path, or module name
    version: str = ""
    description: str = ""
    reward_funcs: list[str] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)  # name -> default (repr when not JSON)
    takes_any_args: bool = False
    added_at: float = 0.0

    @property
    def source(self) -> str:
        return "local path" if self.kind == "path" else "installed package"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Entry:
        if not isinstance(data, dict):
            raise TypeError("not a JSON object")
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        entry = cls(**known)
        if entry.kind not in KINDS or not entry.target or not ID_RE.match(entry.id):
            raise ValueError(f"bad entry (kind={entry.kind!r}, target={entry.target!r})")
        return entry


def root() -> Path:
    from primenb.home import prime_home

    return prime_home() / "environments"


def _file(env_id: str) -> Path:
    return root() / f"{env_id}.json"


def check_id(env_id: str) -> None:
    if not ID_RE.match(env_id):
        raise RegistryError(
            f"{env_id!r} is not a valid environment id: use letters, digits, '-', '_' and '.', "
            f"starting with a letter or digit (at most 64 characters; no '/' or ':')"
        )


def load(env_id: str) -> Entry | None:
    """The entry registered as ``env_id``, or None (also for an unreadable file, logged)."""
    if not ID_RE.match(env_id):
        return None
    path = _file(env_id)
    if not path.is_file():
        return None
    try:
        return Entry.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError) as exc:
        log.warning("skipping unreadable registry entry %s: %s", path, exc)
        return None


def ids() -> list[str]:
    """Registered ids (names of the entry files; cheap: nothing is parsed)."""
    folder = root()
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.glob("*.json") if ID_RE.match(p.stem))


def entries() -> list[Entry]:
    return [e for e in (load(i) for i in ids()) if e is not None]


def problems() -> list[str]:
    """Entry files that cannot be read, with the reason."""
    out = []
    folder = root()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            Entry.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            out.append(f"{path}: {exc}")
    return out


def save(entry: Entry) -> Path:
    from primenb.fsutil import atomic_write_json

    check_id(entry.id)
    if not entry.added_at:
        entry.added_at = time.time()
    return atomic_write_json(_file(entry.id), entry.to_json())


def delete(env_id: str) -> Entry:
    entry = load(env_id)
    path = _file(env_id)
    if entry is None and not path.is_file():
        raise RegistryError(f"{env_id!r} is not registered")
    path.unlink()
    return entry or Entry(id=env_id, kind="path", target="?")


__all__ = ["ID_RE", "Entry", "check_id", "delete", "entries", "ids", "load", "problems", "root", "save"]
