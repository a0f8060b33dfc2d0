"""File writes that never leave a half-written file behind, and never replace what is not a file."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError


class NotAFileError(PrimenbError):
    """The target exists and is a device, FIFO, socket or folder: a writer must not replace it."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def check_writable_target(path: str | os.PathLike[str]) -> None:
    """Refuse a target that exists and is not a regular file (nor a link, which the rename
    replaces without touching what it points to): an atomic rename onto ``/dev/null`` as root
    would replace the device with an ordinary file, onto a FIFO would cut off its reader."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise NotAFileError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise NotAFileError(f"{os.fspath(path)} is {kind}, not a file: nothing was written; give a file path instead")


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write `text` to `path` via a temp file in the same folder and an atomic rename; a target
    that exists and is not a regular file is refused (`NotAFileError`), before anything is made."""
    target = Path(path)
    check_writable_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp makes 0600 files; a written file gets the mode a plain open() would give it
        os.fchmod(fd, _mode_for(target))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        check_writable_target(target)  # made meanwhile (a FIFO created while we wrote)
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
