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
    """One small chart per call; each series is scaled to its own range (labels show it). A
    one-point series is drawn as a dot (a polyline of one point is invisible)."""
    pad_l, pad_r, pad_t, pad_b = 8, 8, 18, 16
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    all_x = [x for xs, _ in series.values() for x in xs]
    if not all_x:
        return f'<svg width="{width}" height="{height}"><text x="8" y="20" fill="#888">no data yet</text></svg>'
    x0, x1 = min(all_x), max(all_x)
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'style="background:#fff;border:1px solid #eee">'
        ),
        f'<text x="{pad_l}" y="12" font-size="11" fill="#333">{html.escape(title)}</text>',
    ]
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
