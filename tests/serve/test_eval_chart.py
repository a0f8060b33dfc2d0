"""The eval's bar chart: its y axis starts at 0 (every reward 0 read as -1…1 with bars mid-chart)."""

from __future__ import annotations

import pandas as pd

from primenb.serve.evaluate import EvalResult, reward_range


def test_the_reward_axis_starts_at_zero_and_covers_the_intervals() -> None:
    assert reward_range([0.0, 0.0], [0.0, 0.0]) == [0.0, 1.0]  # all 0: not -1…1
    assert reward_range([0.1, 0.2], [0.3, 0.5]) == [0.0, 0.5 + 0.025]
    assert reward_range([-0.5, 0.0], [0.0, 0.5]) == [-0.5, 0.5 + 0.05]
    assert reward_range([float("nan")], [float("nan")]) == [0.0, 1.0]


def test_an_all_zero_eval_is_drawn_from_zero_up() -> None:
    table = pd.DataFrame(
        {"model": ["base", "tuned"], "reward_mean": [0.0, 0.0], "ci95_low": [0.0, 0.0], "ci95_high": [0.0, 0.0]}
    )
    result = EvalResult(env="reverse-text", table=table, samples=pd.DataFrame(), server="http://127.0.0.1:1")
    assert list(result.chart().layout.yaxis.range) == [0.0, 1.0]
