"""HTML and text building blocks for harness displays (no pandas: fast and static,
so they read the same in JupyterLab, VS Code, nbconvert, on GitHub and in a terminal)."""

from __future__ import annotations

import bisect
import datetime as _dt
import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from primenb.render.svgchart import COLORS, STATE_COLORS, line_chart  # noqa: F401 - COLORS: comparison.py

MIN_ID = 4  # `get` resolves id prefixes of 4+ characters
TABLE_STYLE = "border-collapse:collapse;font-size:12px"
CELL = "padding:1px 6px;text-align:left;vertical-align:top"
HEAD = "padding:1px 6px;text-align:left;color:#555"
ROW = ' style="border-bottom:1px solid #eee"'


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def fmt(value: Any, *, digits: int = 4) -> str:
    """A readable cell: numbers to ``digits`` significant digits, None as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e6):
            return f"{value:.2e}"
        return f"{value:.{digits}g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    return str(value)


def fmt_duration(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or math.isnan(seconds):
        return ""
    s = round(seconds)
    if s < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def fmt_time(epoch: Any) -> str:
    if not isinstance(epoch, (int, float)) or not epoch:
        return ""
    return _dt.datetime.fromtimestamp(float(epoch)).strftime("%Y-%m-%d %H:%M")


def short(value: Any, n: int = 12) -> str:
    return "" if value is None else str(value)[:n]


def status_badge(state: Any) -> str:
    color = STATE_COLORS.get(str(state), "#888")
    return f'<span style="color:{color};font-weight:600">{esc(state)}</span>'


def table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    raw: bool = False,
    nowrap: bool = False,
    raw_header: bool = False,
) -> str:
    """An HTML table; cells are escaped unless ``raw`` (then they are HTML already), the header
    unless ``raw_header``. ``nowrap``: one line per row (inline styles: a notebook's sanitizer
    keeps them, unlike a <style> block)."""
    one_line = ";white-space:nowrap" if nowrap else ""
    head = "".join(f'<th style="{HEAD}{one_line}">{h if raw_header else esc(h)}</th>' for h in header)
    body = "".join(
        f"<tr{ROW}>" + "".join(f'<td style="{CELL}{one_line}">{c if raw else esc(c)}</td>' for c in row) + "</tr>"
        for row in rows
    )
    return (
        f'<table style="{TABLE_STYLE}"><thead><tr style="border-bottom:1px solid #ccc">{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def kv_table(data: Mapping[str, Any]) -> str:
    rows = "".join(
        f'<tr{ROW}><th style="{HEAD}">{esc(k)}</th><td style="{CELL}">{esc(fmt(v))}</td></tr>' for k, v in data.items()
    )
    return f'<table style="{TABLE_STYLE}">{rows}</table>'


def details(summary: str, body: str, *, open_: bool = False) -> str:
    return (
        f'<details{" open" if open_ else ""} style="margin:4px 0"><summary style="cursor:pointer;'
        f'font-weight:600">{esc(summary)}</summary><div style="margin:4px 0 4px 16px">{body}</div></details>'
    )


def clip(text: str, width: int | None) -> str:
    """``text`` at most ``width`` characters, shortened in the middle with an ellipsis (the start
    and the end of a name are what tell runs apart)."""
    if width is None or len(text) <= width:
        return text
    tail = (width - 1) // 2
    return text[: width - 1 - tail] + "…" + text[len(text) - tail :]


def scrolling(html_: str) -> str:
    """A wide table scrolls sideways in its output area rather than being cut off."""
    return f'<div style="overflow-x:auto;max-width:100%">{html_}</div>'


def text_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, max_width: int | None = 40) -> str:
    """A fixed-width text table for terminals and ``text/plain``; a cell wider than ``max_width``
    is clipped with an ellipsis, never silently cut."""
    cells = [[clip(fmt(c), max_width) for c in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(row.rstrip() for row in out)


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [{"d": 2}]}`` -> ``{"a.b": 1, "c[0].d": 2}``."""
    out: dict[str, Any] = {}
    if isinstance(data, Mapping):
        if not data and prefix:
            out[prefix] = {}
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(data, list) and any(isinstance(v, (Mapping, list)) for v in data):
        for i, value in enumerate(data):
            out.update(flatten(value, f"{prefix}[{i}]"))
    else:
        out[prefix] = data
    return out


def short_ids(ids: Iterable[str], universe: Iterable[str], minimum: int = MIN_ID) -> dict[str, str]:
    """Each of ``ids`` -> its shortest prefix (at least ``minimum`` characters) that no other id
    of ``universe`` starts with, as git shortens hashes. In sorted order an id shares its longest
    prefix with a neighbour, so two comparisons per id suffice."""
    ordered = sorted(set(universe))
    out = {}
    for tid in ids:
        i = bisect.bisect_left(ordered, tid)
        neighbours = [ordered[j] for j in (i - 1, i, i + 1) if 0 <= j < len(ordered) and ordered[j] != tid]
        shared = max((_common(tid, n) for n in neighbours), default=0)
        out[tid] = tid[: max(minimum, shared + 1)]
    return out


def id_html(full: str, short: Mapping[str, str]) -> str:
    """A trace id as the trace table shows it: its short prefix, the full id on hover."""
    shown = short.get(full, full)
    return f'<span title="{esc(full)}">{esc(shown)}</span>' if shown != full else esc(full)


def _common(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def svg_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str = "",
    width: int = 360,
    height: int = 180,
    colors: Mapping[str, str] | None = None,
) -> str:
    """Several series overlaid on one shared scale: the one renderer of render/svgchart.py."""
    if not any(series.values()):
        return ""
    data = {name: ([p[0] for p in pts], [p[1] for p in pts]) for name, pts in series.items() if pts}
    return line_chart(data, title=title, width=width, height=height, shared=True, values=False, colors=colors)


__all__ = [
    "clip",
    "details",
    "esc",
    "flatten",
    "fmt",
    "fmt_duration",
    "fmt_time",
    "id_html",
    "kv_table",
    "scrolling",
    "short",
    "short_ids",
    "status_badge",
    "svg_chart",
    "table",
    "text_table",
]
