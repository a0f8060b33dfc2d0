"""A dependency-free SVG line chart: the static fallback where widgets and JS do not run
(nbconvert, GitHub, VS Code without a widget manager, a saved notebook)."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


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


def line_chart(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "",
    width: int = 320,
    height: int = 160,
) -> str:
    """One small chart per call; each series is scaled to its own range (labels show it). A chart
    of one series also gets a y axis (ticks at its low, middle and high value, with grid lines). A
    one-point series is drawn as a dot (a polyline of one point is invisible)."""
    drawn = [ys for xs, ys in series.values() if xs]
    if not drawn:
        return f'<svg width="{width}" height="{height}"><text x="8" y="20" fill="#888">no data yet</text></svg>'
    pad_l, pad_r, pad_t, pad_b = (40 if len(drawn) == 1 else 8), 8, 18, 16
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    all_x = [x for xs, _ in series.values() for x in xs]
    x0, x1 = min(all_x), max(all_x)
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'style="background:#fff;border:1px solid #eee">'
        ),
        f'<text x="8" y="12" font-size="11" fill="#333">{html.escape(title)}</text>',
    ]
    if len(drawn) == 1:
        parts.extend(_y_axis(min(drawn[0]), max(drawn[0]), pad_l, pad_t, w, h))
    legend_y = 12
    for i, (name, (xs, ys)) in enumerate(series.items()):
        if not xs:
            continue
        xs, ys = downsample(xs, ys, w)
        lo, hi = min(ys), max(ys)
        span = (hi - lo) or 1.0
        pts = " ".join(
            f"{pad_l + (x - x0) / ((x1 - x0) or 1) * w:.1f},{pad_t + h - (y - lo) / span * h:.1f}"
            for x, y in zip(xs, ys, strict=True)
        )
        color = COLORS[i % len(COLORS)]
        if len(xs) == 1:
            cx, cy = pts.split(",")
            parts.append(f'<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>')
        else:
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>')
        label = f"{name}: {ys[-1]:.4g} ({lo:.3g}…{hi:.3g})"
        parts.append(
            f'<text x="{width - pad_r}" y="{legend_y}" text-anchor="end" font-size="10" '
            f'fill="{color}">{html.escape(label)}</text>'
        )
        legend_y += 11
    parts.append(f'<text x="{pad_l}" y="{height - 3}" font-size="9" fill="#888">step {x0:g}</text>')
    parts.append(
        f'<text x="{width - pad_r}" y="{height - 3}" font-size="9" fill="#888" '
        f'text-anchor="end">step {x1:g}</text></svg>'
    )
    return "".join(parts)


def _y_axis(lo: float, hi: float, left: int, top: int, w: int, h: int) -> list[str]:
    """Tick labels at the low, middle and high value (a flat series: its one value), each with a
    faint grid line, the way the series below is scaled."""
    ticks = [(lo, 0.0), ((lo + hi) / 2, 0.5), (hi, 1.0)] if hi > lo else [(lo, 0.0)]
    out = []
    for value, frac in ticks:
        y = top + h - frac * h
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(
            f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" font-size="9" fill="#888">{value:.3g}</text>'
        )
    return out
