"""Where a diagnostic points in the TOML text: the key, where its value came from, or its nearest
table (the loader's checks and the hosted platform's rules share it)."""

from __future__ import annotations

from primenb.config.diagnostics import Diagnostic, format_path
from primenb.config.positions import Path, Positions


def located(
    pos: Positions,
    origins: dict[Path, Path],
    path: Path,
    severity: str,
    code: str,
    message: str,
    hint: str,
    *,
    on_value: bool = False,
) -> Diagnostic:
    """A diagnostic located at `path`, or where its value came from, or its nearest table."""
    target = path if path in pos.spans else origins.get(path, path)
    if target not in pos.spans:
        for n in range(len(path) - 1, 0, -1):
            if path[:n] in origins and origins[path[:n]] in pos.spans:
                target = origins[path[:n]]
                break
    found = pos.locate(target)
    line = col = end = None
    if found:
        at, span = found
        line, col, end = span.line, span.col, span.end_col
        if on_value and at == target and span.value_col:
            text = pos.lines[span.line - 1]
            col, end = span.value_col, value_end(text, span.value_col)
    return Diagnostic(severity, code, format_path(path), message, hint, line, col, end)


def value_end(line: str, value_col: int) -> int:
    """1-based column just past a one-line value (before any trailing comment)."""
    in_str: str | None = None
    for i in range(value_col - 1, len(line)):
        c = line[i]
        if in_str:
            if c == in_str:
                in_str = None
        elif c in "\"'":
            in_str = c
        elif c == "#":
            return len(line[:i].rstrip()) + 1
    return len(line.rstrip()) + 1


__all__ = ["located", "value_end"]
