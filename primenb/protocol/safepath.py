"""The one sanitiser for names and paths that come from a file or a user.

Run names, trace names and checkpoint steps read from bundles, configs and command lines become
folder names; a hostile one (``../../x``, ``/abs``, ``a/b``, 300 bytes) must never place a file
outside the folder meant to hold it. Every such name goes through `safe_name`; every path built
from one, and every path read from a file that is about to be written to, goes through
`contained`.
"""

from __future__ import annotations

import os
import re
import unicodedata
from pathlib import Path

from primenb.errors import PrimenbError

MAX_NAME_BYTES = 255  # the limit of one path component on Linux and macOS filesystems
_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class UnsafePathError(PrimenbError):
    """A name or path that would leave the folder it belongs in."""


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot be one folder name, or None when it can."""
    if not isinstance(name, str) or not name:
        return "it is empty" if name == "" else f"it is not text ({type(name).__name__})"
    if name in (".", ".."):
        return "it names the current or parent folder"
    if "/" in name or "\\" in name or os.sep in name or (os.altsep and os.altsep in name):
        return "it contains a path separator"
    if "\x00" in name or any(ord(c) < 32 for c in name):
        return "it contains control characters"
    if any(unicodedata.category(c) in ("Cf", "Cc", "Cs") for c in name):
        # U+202E and the other bidirectional and invisible format characters make a name read as
        # another one (``run\u202egnp.exe``) in listings, the sidebar and a terminal
        return "it contains invisible or bidirectional formatting characters (such as U+202E)"
    if name != name.strip():
        return "it starts or ends with whitespace"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def safe_name(name: object, what: str = "run name") -> str:
    """``name`` when it is a single, ordinary folder name; a clear `UnsafePathError` otherwise."""
    problem = name_problem(name)
    if problem is not None:
        shown = repr(name)[:80] + ("..." if len(repr(name)) > 80 else "")
        raise UnsafePathError(
            f"{what} {shown} cannot be used: {problem}. Use letters, digits, '-', '_' and '.' "
            f"(at most {MAX_NAME_BYTES} bytes, no '/' and not '..')"
        )
    return str(name)


def slug(text: str, limit: int = 120) -> str:
    """A safe folder name made from arbitrary text (default run names from env ids, model ids)."""
    out = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.") or "run"
    return out[:limit]


def is_safe_id(value: object) -> bool:
    """A trace id as primenb writes them (and nothing that could be a path or SQL pattern)."""
    return isinstance(value, str) and bool(_SAFE_ID.match(value))


def contained(base: str | os.PathLike[str], path: str | os.PathLike[str], what: str = "path") -> Path:
    """``path`` (relative paths are taken under ``base``), resolved; `UnsafePathError` unless it
    lies inside ``base`` (symlinks followed on both sides)."""
    root = Path(base).resolve()
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise UnsafePathError(f"{what} {str(path)[:200]!r} points outside {root}; refusing to write there")
    return target


def symlinks_under(folder: Path) -> list[Path]:
    """Symbolic links inside ``folder`` (a bundle that holds one could make a copy write or read
    outside its place)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for entry in (*dirnames, *filenames):
            p = Path(dirpath) / entry
            if p.is_symlink():
                found.append(p)
    return found


def write_user_file(path: str | os.PathLike[str], text: str, *, overwrite: bool) -> Path:
    """Write a file a user named (`init --out`, `%%rltoml --save`): atomically, never through or
    over a symbolic link (``--force`` onto a link would replace the link), never over a folder,
    and with a message instead of a traceback when the place cannot be written."""
    from primenb.fsutil import atomic_write_text

    target = Path(path).expanduser()
    if target.is_symlink():
        raise UnsafePathError(f"{target} is a symbolic link; write to the file it points to ({target.resolve()})")
    if target.is_dir():
        raise UnsafePathError(f"{target} is a folder; give a file path, e.g. {target / 'rl.toml'}")
    if target.exists() and not overwrite:
        raise PrimenbError(f"{target} already exists; pass --out OTHER.toml, or --force to overwrite it")
    try:
        return atomic_write_text(target, text)
    except OSError as exc:
        raise PrimenbError(f"cannot write {target}: {exc.strerror or exc}") from None


__all__ = [
    "MAX_NAME_BYTES",
    "UnsafePathError",
    "contained",
    "is_safe_id",
    "name_problem",
    "safe_name",
    "slug",
    "symlinks_under",
    "write_user_file",
]
