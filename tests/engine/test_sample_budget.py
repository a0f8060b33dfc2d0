"""When SFT samples are drawn: the time budget that keeps them cheap (a fake clock; fast)."""

from __future__ import annotations

from primenb.engine.callbacks import SFT_SAMPLE_TIME_SHARE, SampleBudget


def test_a_sample_set_waits_until_it_fits_the_time_share() -> None:
    budget = SampleBudget(0.02)
    assert budget.allows(0.0)  # nothing sampled yet: the first set is always drawn
    budget.spent(step=0, started=0.0, ended=0.5)  # a set that took 0.5 s
    assert budget.sampled(0) and not budget.sampled(10)
    assert not budget.allows(0.5 + 10.0)  # 0.5 s in 10 s would be 5%
    assert budget.allows(0.5 + 25.0)  # 0.5 s in 25 s is 2%
    budget.spent(step=40, started=30.0, ended=30.25)  # a cheaper set: the next may come sooner
    assert budget.allows(30.25 + 13.0) and not budget.allows(30.25 + 12.0)


def test_the_default_share_is_small() -> None:
    assert 0 < SFT_SAMPLE_TIME_SHARE <= 0.02  # issue 11: sampling must not cost the run its throughput
