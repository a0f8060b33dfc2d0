"""The static SVG chart of saved notebooks: readable values on its y axis, dots for single points."""

from __future__ import annotations

import re

from primenb.render.svgchart import line_chart


def _ticks(svg: str) -> list[str]:
    return re.findall(
        r'text-anchor="end" font-size="9" style="fill:var\(--jp-ui-font-color2, #757575\)">([^<]+)</text>', svg
    )


def test_one_series_gets_low_middle_high_ticks_placed_like_its_line() -> None:
    svg = line_chart({"loss": ([1, 2, 3], [6.0, 5.0, 4.0])}, title="loss", width=300, height=150)
    assert _ticks(svg)[:3] == ["4", "5", "6"]
    # the top tick's grid line is where the line starts (the highest value), the bottom one where it ends
    grid = [float(y) for y in re.findall(r'<line x1="\d+" x2="292" y1="([\d.]+)"', svg)]
    points = re.search(r'points="([^"]+)"', svg)
    assert points is not None
    ys = [float(p.split(",")[1]) for p in points.group(1).split()]
    assert max(grid) == max(ys) and min(grid) == min(ys)


def test_a_flat_series_has_one_tick_at_its_value() -> None:
    svg = line_chart({"reward": ([1, 2, 3], [0.0, 0.0, 0.0])}, title="reward")
    assert _ticks(svg)[:1] == ["0"] and svg.count("<line ") == 1


def test_several_series_keep_their_own_ranges_without_a_shared_axis() -> None:
    svg = line_chart({"a": ([1, 2], [1.0, 2.0]), "b": ([1, 2], [30.0, 10.0])}, title="two")
    assert "<line " not in svg
    assert "a: 2 (1…2)" in svg and "b: 10 (10…30)" in svg


def test_one_point_is_a_dot_and_no_data_says_so() -> None:
    assert "<circle" in line_chart({"eval": ([5], [0.5])})
    assert "no data yet" in line_chart({"eval": ([], [])})


def test_names_are_escaped() -> None:
    svg = line_chart({"<b>x</b>": ([1, 2], [1.0, 2.0])}, title="<script>")
    assert "<script>" not in svg and "<b>" not in svg


def test_y_labels_fit_left_of_the_axis_with_their_minus_sign() -> None:
    """ "-0.000633" at a fixed 40 px margin was clipped at the chart's left edge to "000633": the
    margin is as wide as the longest label, which ends 4 px left of the axis and starts inside."""
    svg = line_chart({"loss": ([1, 2, 3], [-0.000633, -0.0003, 0.0001])}, title="loss", width=300)
    labels = re.findall(r'<text x="(\d+)"[^>]*text-anchor="end" font-size="9"[^>]*>([^<]+)</text>', svg)
    axis = int(re.findall(r'<line x1="(\d+)"', svg)[0])
    ticks = [(int(x), text) for x, text in labels if int(x) < axis]  # not the legend at the right
    assert [t for _, t in ticks] == ["-0.000633", "-0.000266", "0.0001"]
    for x, text in ticks:
        assert x == axis - 4 and x - 5.5 * len(text) >= 0, (x, text)


def test_a_name_keeps_its_colour_when_another_series_has_no_points() -> None:
    """compare draws a chart per metric: a trace without points in one chart kept the palette's
    order, so the next trace took its colour there."""
    colors = {"a": "#111111", "b": "#222222"}
    svg = line_chart({"a": ([], []), "b": ([1, 2], [1.0, 2.0])}, shared=True, values=False, colors=colors)
    assert 'stroke="#222222"' in svg and 'style="fill:#222222">b</text>' in svg and "#111111" not in svg
    assert 'stroke="#1f77b4"' in line_chart({"a": ([], []), "b": ([1, 2], [1.0, 2.0])})  # no colours: the palette


def test_the_y_axis_is_named_when_asked() -> None:
    assert ">reward</text>" in line_chart({"r": ([1, 2], [0.1, 0.2])}, y_label="reward")
    assert ">reward</text>" not in line_chart({"r": ([1, 2], [0.1, 0.2])})


def test_a_mark_at_the_right_edge_keeps_its_whole_label_inside_the_chart() -> None:
    """The dashed GRPO mark stands at the warm-up's last step, the right edge until GRPO's first
    eval: its label went right of the line and was clipped to "G"; there it goes left of it."""
    from primenb.render.svgchart import _label_width

    for at, anchored in ((30.0, True), (15.0, False)):  # the last x drawn, then mid-chart
        svg = line_chart({"eval": ([0.0, 30.0], [0.1, 0.4])}, width=300, height=160, marks=[(at, "GRPO")])
        (text,) = re.findall(r'<text x="([\d.]+)" y="[\d.]+"( text-anchor="end")? [^>]*>GRPO</text>', svg)
        x, end = float(text[0]), bool(text[1])
        assert end == anchored, svg
        left, right = (x - 1.3 * _label_width("GRPO"), x) if end else (x, x + 1.3 * _label_width("GRPO"))
        assert left >= 0 and right <= 300, (left, right)
