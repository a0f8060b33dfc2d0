"""Where each key and table of a TOML text sits, so diagnostics can quote the right line.

`tomli` gives values but no positions, so this scanner walks the text once and records,
for every TOML path (a tuple of keys and array-of-tables indices), the line and columns of
its key (or table header) and where its value starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Path = tuple[str | int, ...]
TablePath = tuple[str, ...]  # a path through tables only (no list index): every part a key

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class Span:
    line: int  # 1-based
    col: int  # 1-based column of the key or header
    end_col: int  # column just past the key or header
    value_col: int | None = None  # 1-based column where the value starts (key lines only)
    header: bool = False


@dataclass
class Positions:
    spans: dict[Path, Span]
    lines: list[str]

    def locate(self, path: Path) -> tuple[Path, Span] | None:
        """The span of `path`, else of its first descendant (a table only implied by
        `[a.b]` lives there), else of its longest prefix that appears in the text."""
        if path and path not in self.spans:
            inside = [(s.line, p) for p, s in self.spans.items() if p[: len(path)] == path]
            if inside:
                _, first = min(inside)
                return first, self.spans[first]
        for n in range(len(path), 0, -1):
            span = self.spans.get(path[:n])
            if span is not None:
                return path[:n], span
        return None

    def table_end(self, path: Path) -> int | None:
        """Last line (1-based) that belongs to the table at `path` (header tables only)."""
        span = self.spans.get(path)
        if span is None or not span.header:
            return None
        headers = sorted((s.line, p) for p, s in self.spans.items() if s.header)
        for line, other in headers:
            if line > span.line and other[: len(path)] != path:
                return _last_content_line(self.lines, span.line, line - 1)
        return _last_content_line(self.lines, span.line, len(self.lines))


def _last_content_line(lines: list[str], start: int, stop: int) -> int:
    for n in range(stop, start - 1, -1):
        if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#"):
            return n
    return start


def _parse_key(s: str, i: int) -> tuple[list[str], int] | None:
    """Parse a (dotted) key starting at s[i]; return its parts and the index after it."""
    parts: list[str] = []
    while True:
        while i < len(s) and s[i] in " \t":
            i += 1
        if i >= len(s):
            return None
        if s[i] in "\"'":
            q = s[i]
            j = i + 1
            buf = []
            while j < len(s) and s[j] != q:
                if q == '"' and s[j] == "\\" and j + 1 < len(s):
                    buf.append(s[j + 1])
                    j += 2
                    continue
                buf.append(s[j])
                j += 1
            if j >= len(s):
                return None
            parts.append("".join(buf))
            i = j + 1
        else:
            m = _BARE_KEY.match(s, i)
            if not m:
                return None
            parts.append(m.group(0))
            i = m.end()
        k = i
        while k < len(s) and s[k] in " \t":
            k += 1
        if k < len(s) and s[k] == ".":
            i = k + 1
            continue
        return parts, i


def _skip_value(lines: list[str], n: int, col: int) -> int:
    """Index of the last line of a value starting at lines[n][col] (handles multi-line values)."""
    depth = 0
    in_str: str | None = None
    i = col
    while n < len(lines):
        s = lines[n]
        while i < len(s):
            if in_str:
                if in_str in ('"""', "'''"):
                    if s.startswith(in_str, i):
                        in_str = None
                        i += 3
                        continue
                    if in_str == '"""' and s[i] == "\\":
                        i += 2
                        continue
                elif s[i] == "\\" and in_str == '"':
                    i += 2
                    continue
                elif s[i] == in_str:
                    in_str = None
                i += 1
                continue
            c = s[i]
            if s.startswith('"""', i) or s.startswith("'''", i):
                in_str = s[i : i + 3]
                i += 3
                continue
            if c in "\"'":
                in_str = c
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            elif c == "#":
                break
            i += 1
        if in_str in ('"', "'"):
            in_str = None  # an unterminated basic string ends at the line (tomli reports it)
        if depth <= 0 and in_str is None:
            return n
        n += 1
        i = 0
    return len(lines) - 1


def _past_value(lines: list[str], n: int, i: int) -> tuple[int, int]:
    """(line, column) just past the value starting at lines[n][i]: a string of any kind, an
    array or inline table (nested, over several lines: TOML 1.1), or a bare scalar."""
    s = lines[n]
    for quote in ('"""', "'''"):
        if s.startswith(quote, i):
            j = i + 3
            while n < len(lines):
                k = lines[n].find(quote, j)
                while k > 0 and quote == '"""' and _escaped(lines[n], k):
                    k = lines[n].find(quote, k + 1)
                if k >= 0:
                    end = k + 3
                    while end < len(lines[n]) and lines[n][end] == quote[0]:
                        end += 1  # up to two quotes may end the content
                    return n, end
                n, j = n + 1, 0
            return len(lines) - 1, 0
    if i < len(s) and s[i] in "\"'":
        j = i + 1
        while j < len(s) and s[j] != s[i]:
            j += 2 if s[i] == '"' and s[j] == "\\" else 1
        return n, j + 1
    if i < len(s) and s[i] in "[{":
        close = "]" if s[i] == "[" else "}"
        n, i = n, i + 1
        while n < len(lines):
            s = lines[n]
            while i < len(s):
                c = s[i]
                if c == "#":
                    break
                if c == close:
                    return n, i + 1
                if c in " \t,=":
                    i += 1
                elif c.isalnum() or (c in "_-." and close == "}"):
                    i += 1  # a key of an inline table
                else:
                    n, i = _past_value(lines, n, i)
                    s = lines[n]
            n, i = n + 1, 0
        return len(lines) - 1, 0
    j = i
    while j < len(s) and s[j] not in ",}] \t#":
        j += 1
    return n, max(j, i + 1)


def _escaped(line: str, k: int) -> bool:
    backslashes = len(line[:k]) - len(line[:k].rstrip("\\"))
    return backslashes % 2 == 1


def _inline_keys(lines: list[str], n: int, i: int, table: Path, spans: dict[Path, Span]) -> None:
    """Record the keys of the inline table opening at lines[n][i], nested ones too, so an error
    inside `optim = { lr = ..., }` (over several lines in TOML 1.1) points at its own line."""
    i += 1
    while n < len(lines):
        s = lines[n]
        while i < len(s):
            c = s[i]
            if c in " \t,":
                i += 1
                continue
            if c in "#}":
                if c == "}":
                    return
                break
            parsed = _parse_key(s, i)
            eq = s.find("=", parsed[1]) if parsed else -1
            if parsed is None or eq < 0:
                return  # not a key = value: tomli reports it
            parts, end = parsed
            v = eq + 1
            while v < len(s) and s[v] in " \t":
                v += 1
            path = table + tuple(parts)
            spans[path] = Span(n + 1, i + 1, end + 1, v + 1)
            if v < len(s) and s[v] == "{":
                _inline_keys(lines, n, v, path, spans)
            n, i = _past_value(lines, n, v)
            s = lines[n]
        n, i = n + 1, 0


def scan(text: str) -> Positions:
    lines = text.splitlines()
    spans: dict[Path, Span] = {}
    aot_index: dict[Path, int] = {}
    current: Path = ()

    def resolve(parts: list[str]) -> Path:
        out: Path = ()
        for part in parts:
            out = out + (part,)
            if out in aot_index:
                out = out + (aot_index[out],)
        return out

    n = 0
    while n < len(lines):
        raw = lines[n]
        stripped = raw.lstrip()
        indent = len(raw) - len(stripped)
        if not stripped or stripped.startswith("#"):
            n += 1
            continue
        if stripped.startswith("["):
            is_aot = stripped.startswith("[[")
            start = indent + (2 if is_aot else 1)
            parsed = _parse_key(raw, start)
            if parsed:
                parts, end = parsed
                close = raw.find("]]" if is_aot else "]", end)
                end_col = (close + (2 if is_aot else 1)) if close >= 0 else len(raw)
                if is_aot:
                    prefix = resolve(parts[:-1]) + (parts[-1],)
                    aot_index[prefix] = aot_index.get(prefix, -1) + 1
                    current = prefix + (aot_index[prefix],)
                    spans.setdefault(prefix, Span(n + 1, indent + 1, end_col + 1, header=True))
                else:
                    current = resolve(parts)
                spans[current] = Span(n + 1, indent + 1, end_col + 1, header=True)
            n += 1
            continue
        parsed = _parse_key(raw, indent)
        if parsed is None:
            n += 1
            continue
        parts, end = parsed
        eq = raw.find("=", end)
        if eq < 0:
            n += 1
            continue
        value_col = eq + 1
        while value_col < len(raw) and raw[value_col] in " \t":
            value_col += 1
        path = current + tuple(parts)
        spans[path] = Span(n + 1, indent + 1, end + 1, value_col + 1)
        if raw.startswith("{", value_col):
            _inline_keys(lines, n, value_col, path, spans)
        n = _skip_value(lines, n, value_col) + 1
    return Positions(spans, lines)
