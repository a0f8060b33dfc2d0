"""The one reader for every file the harness reads from a run directory or a bundle.

Everything in a run directory may have been written by someone else (an imported bundle, a
hand edit, a dying engine, an attacker), so reading treats it as hostile input:

- **regular files only**: opened without following a final symbolic link (``O_NOFOLLOW``) and
  without blocking (``O_NONBLOCK``, so a FIFO never hangs a reader), then ``fstat``-checked; a
  FIFO, device, socket or folder reads as missing. With ``root``, the real path must also lie
  inside ``root`` (a link in a parent folder cannot lead out of the run);
- **bounded**: at most ``max_bytes`` are read (``/dev/zero`` or a 10 GB file cannot exhaust memory);
- **text**: invalid UTF-8 is replaced, lone surrogates (``"\\udc80"`` in JSON) become U+FFFD, so
  every string can be encoded again (SQLite, HTTP, files);
- **JSON depth**: nesting the parser cannot take (``[[[[...]]]]``) makes the document unreadable,
  never a `RecursionError`; containers nested deeper than `MAX_DEPTH` become ``None``, so no
  recursive walk downstream can overflow either.

Nothing here raises for a bad file: a reader gets ``None`` / ``{}`` / no rows, and the ``why``
variants say what was wrong (for `harness doctor`-like views).
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_DOC_BYTES = 64 * 2**20  # status.json, trace.json, a manifest: far below this in practice
MAX_JSONL_BYTES = 512 * 2**20  # metrics.jsonl / samples.jsonl of a long run
MAX_LINE_BYTES = 4 * 2**20  # one JSONL row
MAX_DEPTH = 64  # JSON nesting kept; deeper containers become None
_SURROGATE = re.compile("[\ud800-\udfff]")


def open_regular(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> int | None:
    """A read-only descriptor of ``path`` when it is a regular file (not reached through a final
    symbolic link, and inside ``root`` when given); None otherwise. The caller closes it."""
    if root is not None and not _inside(path, root):
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):  # missing, a link (ELOOP), no permission, a NUL in the name
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    return fd


def _inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    try:
        real, top = os.path.realpath(path), os.path.realpath(root)
    except (OSError, ValueError):
        return False
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def is_regular(path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> bool:
    """Whether `open_regular` would open ``path``."""
    fd = open_regular(path, root=root)
    if fd is None:
        return False
    os.close(fd)
    return True


def read_bytes(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_DOC_BYTES, root: str | os.PathLike[str] | None = None
) -> bytes | None:
    """The file's bytes (None when it is not a readable regular file or is larger than
    ``max_bytes``: a document cut short is not a document)."""
    fd = open_regular(path, root=root)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError:
        return None
    return None if len(data) > max_bytes else data


def read_text(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_DOC_BYTES, root: str | os.PathLike[str] | None = None
) -> str | None:
    """A text file (invalid UTF-8 replaced, no lone surrogates); None when not a readable regular file."""
    data = read_bytes(path, max_bytes=max_bytes, root=root)
    return None if data is None else clean_text(data.decode("utf-8", errors="replace"))


def read_tail(path: str | os.PathLike[str], max_bytes: int, *, root: str | os.PathLike[str] | None = None) -> bytes:
    """The last ``max_bytes`` of a regular file (``b""`` when it is not one)."""
    fd = open_regular(path, root=root)
    if fd is None:
        return b""
    try:
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - max_bytes))
            return fh.read(max_bytes)
    except OSError:
        return b""


def read_from(path: str | os.PathLike[str], offset: int, max_bytes: int) -> bytes | None:
    """Up to ``max_bytes`` from ``offset`` of a regular file; None when it is not one."""
    fd = open_regular(path)
    if fd is None:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < offset:  # truncated or replaced: start over
                return None
            fh.seek(offset)
            return fh.read(max_bytes)
    except OSError:
        return None


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (valid pairs are joined)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def sanitize(value: Any, max_depth: int = MAX_DEPTH) -> Any:
    """A copy of a parsed JSON value that is safe to walk and encode: strings (keys too) without
    lone surrogates, containers below ``max_depth`` (deeper ones become None). Iterative: no
    recursion, whatever the depth."""
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    out: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(value, out, 1)]
    while stack:
        src, dst, depth = stack.pop()
        items = src.items() if isinstance(src, dict) else enumerate(src)
        for key, item in items:
            if isinstance(item, str):
                new: Any = clean_text(item)
            elif isinstance(item, (dict, list)):
                if depth >= max_depth:
                    new = None
                else:
                    new = {} if isinstance(item, dict) else []
                    stack.append((item, new, depth + 1))
            else:
                new = item
            if isinstance(dst, dict):
                dst[clean_text(str(key))] = new
            else:
                dst.append(new)
    return out


def _small_int(text: str) -> int | float:
    """Integers longer than Python parses by default (4300 digits) read as inf, not an error."""
    try:
        return int(text)
    except ValueError:
        return float("-inf") if text.startswith("-") else float("inf")


def loads(data: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON text into a sanitized value; `ValueError` when it is not JSON or nests deeper
    than the parser can take (never `RecursionError`)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray)) else data
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as exc:
        if "digits" not in str(exc):
            raise
        try:
            value = json.loads(text, parse_int=_small_int)
        except RecursionError:
            raise ValueError("JSON nested too deeply") from None
    return sanitize(value, max_depth)


def read_json(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_DOC_BYTES, root: str | os.PathLike[str] | None = None
) -> tuple[Any, str | None]:
    """``(value, None)`` or ``(None, why)`` for a JSON file."""
    data = read_bytes(path, max_bytes=max_bytes, root=root)
    if data is None:
        p = Path(path)
        if not os.path.lexists(p):
            return None, "missing"
        return None, f"not a readable regular file under {max_bytes} bytes"
    try:
        return loads(data), None
    except ValueError as exc:
        return None, f"not JSON ({str(exc)[:120]})"


def read_json_object(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_DOC_BYTES, root: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """A JSON object from a file; ``{}`` when missing, unreadable, not JSON or not an object."""
    value, _ = read_json(path, max_bytes=max_bytes, root=root)
    return value if isinstance(value, dict) else {}


def iter_lines(path: str | os.PathLike[str], *, max_bytes: int = MAX_JSONL_BYTES) -> Iterator[bytes]:
    """Complete lines of a regular file (a partial last line, a writer mid-append, is left out;
    a line over `MAX_LINE_BYTES` is skipped), reading at most ``max_bytes``."""
    fd = open_regular(path)
    if fd is None:
        return
    with os.fdopen(fd, "rb") as fh:
        left = max_bytes
        while left > 0:
            line = fh.readline(min(left, MAX_LINE_BYTES + 1))
            if not line:
                return
            left -= len(line)
            if not line.endswith(b"\n"):
                if len(line) > MAX_LINE_BYTES:  # an over-long row: skip to its end
                    while line and not line.endswith(b"\n") and left > 0:
                        line = fh.readline(min(left, MAX_LINE_BYTES))
                        left -= len(line)
                    continue
                return
            yield line


def parse_rows(lines: Iterator[bytes] | list[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines`` (other values and broken lines are skipped)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            row = loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            yield row


def read_jsonl(path: str | os.PathLike[str], *, max_bytes: int = MAX_JSONL_BYTES) -> Iterator[dict[str, Any]]:
    """The JSON-object rows of a JSONL file (see `iter_lines` and `parse_rows`)."""
    yield from parse_rows(iter_lines(path, max_bytes=max_bytes))


def tail_lines(path: str | os.PathLike[str], n: int = 30, max_bytes: int = 64_000) -> list[str]:
    """The last ``n`` lines of a text file (a log), read from its last ``max_bytes``."""
    data = read_tail(path, max_bytes).decode("utf-8", errors="replace")
    return [clean_text(line) for line in data.splitlines()[-n:]]


class JsonlTail:
    """Incremental reader of a growing JSONL file: each call returns only rows appended since the
    last (a partial last line waits for the next call; a file replaced or cut short restarts)."""

    def __init__(self, path: Path, *, chunk_bytes: int = 16 * 2**20) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self._offset = 0
        self._partial = b""

    def read_new(self) -> list[dict[str, Any]]:
        chunk = read_from(self.path, self._offset, self.chunk_bytes)
        if chunk is None:
            if os.path.lexists(self.path) and self._offset:
                self._offset, self._partial = 0, b""  # replaced by a shorter file
            return []
        self._offset += len(chunk)
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()  # an incomplete last line waits for the next read
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial = b""
        return list(parse_rows(lines))


__all__ = [
    "MAX_DEPTH",
    "MAX_DOC_BYTES",
    "JsonlTail",
    "clean_text",
    "is_regular",
    "iter_lines",
    "loads",
    "open_regular",
    "parse_rows",
    "read_bytes",
    "read_json",
    "read_json_object",
    "read_jsonl",
    "read_tail",
    "read_text",
    "sanitize",
    "tail_lines",
]
