"""The one chart renderer and the one palette of every primenb view: dependency-free SVG line and
bar charts (the live monitor's panels, the static run summary, the harness's trace views,
`compare` and its ``--html`` file, the eval's models side by side), a `Figure` of them, and the
colours of lines and run states.

Plain SVG in HTML: it needs no JavaScript and no widget front end, so a chart reads the same live,
in a saved notebook, in nbconvert, on GitHub and in VS Code, and cannot come up empty the way a
widget whose front end lost a race can. Text and frame colours are JupyterLab's theme variables
(with light fallbacks where they are not defined), so a chart follows the dark theme.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from primenb.fsutil import atomic_write_text
from primenb.protocol.documents import State

# line colours: readable on both the light and the dark theme's background
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
# what went wrong, what went well, what needs a look: errors, "valid", warnings, and run states
ERROR, OK, WARN = "#c62828", "#2e7d32", "#b26a00"
STATE_COLORS: dict[str, str] = {
    State.QUEUED: "#888",
    State.RUNNING: "#1f77b4",
    State.COMPLETED: OK,
    State.FAILED: ERROR,
    State.STOPPED: WARN,
}
# JupyterLab theme variables (fallbacks: the light theme) for what is not a line
TEXT = "var(--jp-ui-font-color1, #333)"
MUTED = "var(--jp-ui-font-color2, #757575)"
GRID = "var(--jp-border-color2, #eee)"
BACKGROUND = "var(--jp-layout-color0, #fff)"
BAND = "rgba(31,119,180,0.2)"

Series = Mapping[str, tuple[Sequence[float], Sequence[float]]]


def state_color(state: object) -> str:
    return STATE_COLORS.get(str(state), "#888")


def downsample(xs: Sequence[float], ys: Sequence[float], n: int) -> tuple[list[float], list[float]]:
    """At most ~n points: buckets of old points averaged, the newest kept as is."""
    if len(xs) <= n:
        return list(xs), list(ys)
    size = math.ceil(len(xs) / n)
    ox, oy = [], []
    for i in range(0, len(xs), size):
        bx, by = xs[i : i + size], ys[i : i + size]
        ox.append(bx[-1])
        oy.append(sum(by) / len(by))
    return ox, oy


def _text(x: float, y: float, body: str, *, size: int = 9, color: str = MUTED, anchor: str = "start") -> str:
    end = f' text-anchor="{anchor}"' if anchor in ("end", "middle") else ""
    return f'<text x="{x:.0f}" y="{y:.1f}"{end} font-size="{size}" style="fill:{color}">{html.escape(body)}</text>'


def line_chart(
    series: Series,
    *,
    title: str = "",
    width: int = 320,
    height: int = 160,
    shared: bool = False,
    band: tuple[Sequence[float], Sequence[float], Sequence[float]] | None = None,
    values: bool = True,
    marks: Sequence[tuple[float, str]] = (),
    colors: Mapping[str, str] | None = None,
    y_label: str = "",
) -> str:
    """One small chart. Without ``shared`` each series is scaled to its own range (its legend
    shows it), a chart of one series gets a y axis (ticks at its low, middle and high value, with
    grid lines); with ``shared`` every series (and the ``band``: xs, lows, highs drawn as a shaded
    area) uses one y axis. A one-point series is a dot (a polyline of one point is invisible). The
    legend (each name with its last value and range, or without ``values`` the name alone) sits
    under the title, so a long title never covers a value. ``marks``: (x, label) pairs drawn as
    dashed vertical lines (where GRPO starts on a whole-run eval panel). ``colors``: a line colour
    per name (a name keeps its colour across charts where another series has no points); else the
    palette in order. ``y_label``: the y axis's name, written above its top tick."""
    drawn = {name: xy for name, xy in series.items() if len(xy[0])}
    frame = f'style="background:{BACKGROUND};border:1px solid {GRID}"'
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" {frame}>'
    title_svg = _text(8, 12, title, size=11, color=TEXT)
    if not drawn:
        return f"{head}{title_svg}{_text(8, 28, 'no data yet', size=10)}</svg>"
    one_axis = shared or len(drawn) == 1
    ranges = {name: (min(ys), max(ys)) for name, (_, ys) in drawn.items()}
    if one_axis:
        lows = [lo for lo, _ in ranges.values()] + (list(band[1]) if band else [])
        highs = [hi for _, hi in ranges.values()] + (list(band[2]) if band else [])
        common = (min(lows), max(highs))
        ranges = {name: common for name in ranges}
    # the y axis is as wide as its longest label: a fixed 40 px clipped "-0.000633" to "000633"
    ticks = _ticks(*next(iter(ranges.values()))) if one_axis else []
    pad_l = max(24, 8 + max((_label_width(label) for _, _, label in ticks), default=0)) if one_axis else 8
    pad_r, pad_b = 8, 16
    pad_t = 18 + 11 * len(drawn)  # title line, then one legend line per series
    w, h = width - pad_l - pad_r, max(20, height - pad_t - pad_b)
    all_x = [x for xs, _ in drawn.values() for x in xs] + (list(band[0]) if band else []) + [x for x, _ in marks]
    x0, x1 = min(all_x), max(all_x)

    def sx(x: float) -> float:
        return pad_l + (x - x0) / ((x1 - x0) or 1) * w

    def scale(lo: float, hi: float) -> tuple[float, float]:
        return lo, (hi - lo) or 1.0

    def sy(y: float, lo: float, span: float) -> float:
        return pad_t + h - (y - lo) / span * h

    parts = [head, title_svg]
    if one_axis:
        parts.extend(_y_axis(ticks, pad_l, pad_t, w, h))
    if y_label:
        parts.append(_text(4, pad_t - 3, y_label))
    if band and len(band[0]):
        lo, span = scale(*next(iter(ranges.values())))
        top = [f"{sx(x):.1f},{sy(y, lo, span):.1f}" for x, y in zip(band[0], band[2], strict=True)]
        bottom = [f"{sx(x):.1f},{sy(y, lo, span):.1f}" for x, y in zip(band[0], band[1], strict=True)]
        parts.append(f'<polygon class="primenb-band" fill="{BAND}" points="{" ".join(top + bottom[::-1])}"/>')
    for x, label in marks:
        parts.append(
            f'<line class="primenb-mark" x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{pad_t}" y2="{pad_t + h}" '
            f'style="stroke:{MUTED}" stroke-dasharray="3,3"/>'
        )
        # its label right of the line, or left of it where it would pass the plot's right edge
        # (the GRPO mark stands at the right edge until GRPO's first eval: it read "G")
        right = sx(x) + 3 + 1.3 * _label_width(label) <= width  # capitals: ~1.3x a digit
        parts.append(_text(sx(x) + 3, pad_t + 9, label) if right else _text(sx(x) - 3, pad_t + 9, label, anchor="end"))
    legend_y = 23
    for i, (name, (xs, ys)) in enumerate(drawn.items()):
        lo, span = scale(*ranges[name])
        own_lo, own_hi = min(ys), max(ys)
        xs, ys = downsample(xs, ys, w)
        pts = [(sx(x), sy(y, lo, span)) for x, y in zip(xs, ys, strict=True)]
        color = (colors or {}).get(name) or COLORS[i % len(COLORS)]
        if len(pts) == 1:
            parts.append(f'<circle cx="{pts[0][0]:.1f}" cy="{pts[0][1]:.1f}" r="3" fill="{color}"/>')
        else:
            line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{line}"/>')
        label = f"{name}: {ys[-1]:.4g} ({own_lo:.3g}…{own_hi:.3g})" if values else name
        parts.append(_text(width - pad_r, legend_y, label, color=color, anchor="end"))
        legend_y += 11
    parts.append(_text(pad_l, height - 3, f"step {x0:g}"))
    parts.append(_text(width - pad_r, height - 3, f"step {x1:g}", anchor="end"))
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class Bar:
    """One bar: its name, value, and the interval drawn as a whisker (None: no whisker)."""

    name: str
    value: float
    low: float | None = None
    high: float | None = None


def bar_chart(
    bars: Sequence[Bar],
    *,
    title: str = "",
    width: int = 480,
    height: int = 300,
    y_range: tuple[float, float] | None = None,
    y_label: str = "",
) -> str:
    """Bars side by side, each with its interval as a whisker and its value above it, on one y
    axis (``y_range``, else from 0 to the highest end): a bar of 0 sits on the axis's 0."""
    frame = f'style="background:{BACKGROUND};border:1px solid {GRID}"'
    head = f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" {frame}>'
    title_svg = _text(8, 12, title, size=11, color=TEXT)
    drawn = [b for b in bars if math.isfinite(b.value)]
    if not drawn:
        return f"{head}{title_svg}{_text(8, 28, 'no data yet', size=10)}</svg>"
    ends = [v for b in drawn for v in (b.value, b.low, b.high) if v is not None and math.isfinite(v)]
    lo, hi = y_range if y_range else (min(0.0, *ends), max(0.0, *ends))
    hi = hi if hi > lo else lo + 1.0
    ticks = [(value, (value - lo) / (hi - lo), f"{value:.3g}") for value in (lo, (lo + hi) / 2, hi)]
    pad_l = max(24, 8 + max(_label_width(label) for _, _, label in ticks))
    pad_r, pad_t, pad_b = 8, 30, 30
    w, h = width - pad_l - pad_r, max(20, height - pad_t - pad_b)

    def sy(y: float) -> float:
        return pad_t + h - (min(max(y, lo), hi) - lo) / (hi - lo) * h

    parts = [head, title_svg, *_y_axis(ticks, pad_l, pad_t, w, h)]
    if y_label:
        parts.append(_text(4, pad_t - 6, y_label))
    slot = w / len(drawn)
    for i, bar in enumerate(drawn):
        color = COLORS[i % len(COLORS)]
        x = pad_l + i * slot + slot * 0.2
        top, base = sy(max(bar.value, 0.0) if lo <= 0 else bar.value), sy(min(bar.value, 0.0) if lo <= 0 else lo)
        name = html.escape(bar.name)
        parts.append(
            f'<rect class="primenb-bar" x="{x:.1f}" y="{top:.1f}" width="{slot * 0.6:.1f}" '
            f'height="{base - top:.1f}" fill="{color}"><title>{name}: {bar.value:.4g}</title></rect>'
        )
        mid = x + slot * 0.3
        if bar.low is not None and bar.high is not None and math.isfinite(bar.low) and math.isfinite(bar.high):
            y0, y1 = sy(bar.low), sy(bar.high)
            parts.append(
                f'<path class="primenb-interval" d="M{mid - 4:.1f},{y0:.1f}H{mid + 4:.1f}M{mid:.1f},{y0:.1f}'
                f'V{y1:.1f}M{mid - 4:.1f},{y1:.1f}H{mid + 4:.1f}" style="stroke:{TEXT}" fill="none"/>'
            )
        above = min(top, sy(bar.high)) if bar.high is not None and math.isfinite(bar.high) else top
        parts.append(_text(mid, above - 3, f"{bar.value:.3g}", color=TEXT, anchor="middle"))
        shown = bar.name if len(bar.name) * 5.5 <= slot else bar.name[: max(1, int(slot / 5.5) - 1)] + "…"
        parts.append(_text(mid, height - 12, shown, anchor="middle"))
    parts.append("</svg>")
    return "".join(parts)


@dataclass
class Figure:
    """Charts under one title: what a notebook shows (``_repr_html_``), what a terminal names
    (``repr``), and what ``write_html`` saves as a page that opens anywhere without a network."""

    title: str
    charts: list[tuple[str, str]] = field(default_factory=list)  # (title, SVG)

    def html(self) -> str:
        body = "".join(f'<div class="primenb-chart">{svg}</div>' for _, svg in self.charts)
        return (
            f'<div class="primenb-figure"><div style="font-weight:bold;margin:2px 0">{html.escape(self.title)}</div>'
            f'<div style="display:flex;gap:6px;flex-wrap:wrap">{body}</div></div>'
        )

    def _repr_html_(self) -> str:
        return self.html()

    def __repr__(self) -> str:
        names = ", ".join(t for t, _ in self.charts)
        return f"<primenb Figure {self.title!r}: {len(self.charts)} chart(s){': ' + names if names else ''}>"

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        """The figure as a standalone HTML page (inline SVG: no script, nothing fetched)."""
        page = (
            '<!doctype html>\n<html><head><meta charset="utf-8">'
            f"<title>{html.escape(self.title)}</title></head>"
            f'<body style="font-family:sans-serif;margin:12px">{self.html()}</body></html>\n'
        )
        return atomic_write_text(path, page)


def _ticks(lo: float, hi: float) -> list[tuple[float, float, str]]:
    """(value, height fraction, label) at the low, middle and high value (a flat series: its one
    value)."""
    ticks = [(lo, 0.0), ((lo + hi) / 2, 0.5), (hi, 1.0)] if hi > lo else [(lo, 0.0)]
    return [(value, frac, f"{value:.3g}") for value, frac in ticks]


def _label_width(label: str) -> int:
    """A 9 px label's width in px (digits are ~5.5 px wide in the UI font; '.' and '-' narrower)."""
    return round(sum(3.5 if c in ".-" else 5.5 for c in label))


def _y_axis(ticks: list[tuple[float, float, str]], left: int, top: int, w: int, h: int) -> list[str]:
    """Each tick's label with a faint grid line, the way the series is scaled."""
    out = []
    for _, frac, label in ticks:
        y = top + h - frac * h
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" style="stroke:{GRID}"/>')
        out.append(_text(left - 4, y + 3, label, anchor="end"))
    return out


__all__ = [
    "COLORS",
    "ERROR",
    "OK",
    "STATE_COLORS",
    "WARN",
    "Bar",
    "Figure",
    "bar_chart",
    "downsample",
    "line_chart",
    "state_color",
]
