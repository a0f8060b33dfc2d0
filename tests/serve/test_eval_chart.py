"""The eval's bar chart: its y axis starts at 0 (every reward 0 read as -1…1 with bars mid-chart)."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from primenb.serve.evaluate import EvalResult, reward_range


def test_the_reward_axis_starts_at_zero_and_covers_the_intervals() -> None:
    assert reward_range([0.0, 0.0], [0.0, 0.0]) == [0.0, 1.0]  # all 0: not -1…1
    assert reward_range([0.1, 0.2], [0.3, 0.5]) == [0.0, 0.5 + 0.025]
    assert reward_range([-0.5, 0.0], [0.0, 0.5]) == [-0.5, 0.5 + 0.05]
    assert reward_range([float("nan")], [float("nan")]) == [0.0, 1.0]


def _result(means: list[float], lows: list[float], highs: list[float]) -> EvalResult:
    table = pd.DataFrame({"model": ["base", "tuned"], "reward_mean": means, "ci95_low": lows, "ci95_high": highs})
    return EvalResult(env="reverse-text", table=table, samples=pd.DataFrame(), server="http://127.0.0.1:1")


def _ticks(svg: str) -> list[str]:
    return re.findall(r'text-anchor="end" font-size="9"[^>]*>([^<]+)</text>', svg)


def test_an_all_zero_eval_is_drawn_from_zero_up() -> None:
    figure = _result([0.0, 0.0], [0.0, 0.0], [0.0, 0.0]).chart()
    (_, svg), *_ = figure.charts
    assert _ticks(svg) == ["0", "0.5", "1"]  # the axis runs 0…1, not -1…1
    axis_zero = float(re.findall(r'<line x1="\d+" x2="\d+" y1="([\d.]+)"', svg)[0])
    bars = re.findall(r'<rect class="primenb-bar" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg)
    assert [(float(y), float(h)) for y, h in bars] == [(axis_zero, 0.0), (axis_zero, 0.0)]  # on the 0 line


def test_the_models_are_bars_with_their_intervals_in_one_svg_renderer(tmp_path: Path) -> None:
    figure = _result([0.2, 0.6], [0.1, 0.5], [0.3, 0.7]).chart()
    assert figure.title == "reverse-text: mean reward (95 % CI)"
    (_, svg), *_ = figure.charts
    heights = [float(h) for h in re.findall(r'class="primenb-bar"[^>]* height="([\d.]+)"', svg)]
    assert len(heights) == 2 and heights[1] == pytest.approx(3 * heights[0], abs=0.2)  # 0.6 = 3 x 0.2, from 0
    assert svg.count('class="primenb-interval"') == 2 and ">tuned<" in svg and ">base<" in svg
    assert "<svg" in figure._repr_html_() and "reverse-text: mean reward" in figure._repr_html_()
    page = figure.write_html(tmp_path / "eval.html").read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>") and "<script" not in page and svg in page
