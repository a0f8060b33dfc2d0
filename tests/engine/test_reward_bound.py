"""Reward values on their way into TRL (`RewardRecorder`): whatever a reward function returns,
the weighted value TRL sums stays where its float32 group statistics are finite, so one huge score
cannot turn a whole step's advantages into NaN (issue 42: reward totals kept finite)."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from primenb.engine.callbacks import TRAIN_REWARD_BOUND, RewardRecorder, StepClock


def _recorder() -> RewardRecorder:
    plan = SimpleNamespace(rl=SimpleNamespace(reward_error_limit=1.0), sample_every=1)
    return RewardRecorder(SimpleNamespace(plan=plan, clock=StepClock(), is_main=False, abs_step=lambda s: s))  # type: ignore[arg-type]


def _score(values: list[Any], weight: float) -> list[float | None]:
    wrapped = _recorder().wrap(None, lambda prompts, completions, **_: values, weight, name="r", source=None)  # type: ignore[arg-type]
    return wrapped(prompts=["p"] * len(values), completions=["c"] * len(values))


def test_huge_and_infinite_scores_are_clamped_nan_and_none_left_for_trl() -> None:
    out = _score([1e308, -1e308, float("inf"), 0.5, None, float("nan")], 2.0)
    bound = TRAIN_REWARD_BOUND / 2
    assert out[:4] == [bound, -bound, bound, 0.5]
    assert out[4] is None and math.isnan(out[5])  # type: ignore[arg-type]
    weighted = torch.tensor([2 * v for v in out[:4]], dtype=torch.float32)  # what TRL builds
    assert torch.isfinite(weighted.mean()) and torch.isfinite(weighted.std())


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(allow_nan=False), min_size=2, max_size=8),
    weight=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False).filter(lambda w: abs(w) >= 1e-6),
)
def test_any_float_score_keeps_the_steps_statistics_finite(values: list[float], weight: float) -> None:
    out = _score(values, weight)
    assert all(v is not None and abs(weight * v) <= TRAIN_REWARD_BOUND * (1 + 1e-9) for v in out)
    assert [v for v, o in zip(values, out, strict=True) if abs(weight * v) <= TRAIN_REWARD_BOUND] == [
        o for v, o in zip(values, out, strict=True) if abs(weight * v) <= TRAIN_REWARD_BOUND
    ]  # in-range scores pass unchanged
    weighted = torch.tensor([weight * v for v in out], dtype=torch.float32)  # type: ignore[operator]
    assert torch.isfinite(weighted.mean()) and torch.isfinite(weighted.std())
