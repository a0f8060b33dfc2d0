"""File writes that never leave a half-written file behind."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` via a temp file in the same folder and an atomic rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes 0600 files; a written file gets the mode a plain open() would give it
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no /proc: read it the only other way (and put it back)
    os.umask(mask)
    return mask


def _mode_for(target: Path) -> int:
    """The existing file's mode when replacing one (a user's chmod stands), else 0666 minus the
    umask: configs, exports and run files are the user's ordinary files (0644 under umask 022).
    Only files that can hold a secret are 0600, and they are made where they are written (the
    private hashing key: `primenb.protocol.hashing`)."""
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON file holding an object; ``{}`` when it is missing, unreadable or not an object."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
