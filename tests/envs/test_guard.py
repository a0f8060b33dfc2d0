"""Reward functions that raise on some completions: scored 0.0, logged, the batch goes on."""

from __future__ import annotations

import logging
import math

import pytest

from primenb.envs import Environment, RewardFunctionError, get_environment, register_environment
from primenb.envs.guard import GuardedReward, PartialScores, guard
from primenb.envs.registry import unregister_environment


def picky(prompts, completions, **kw):
    """Raises on any completion containing 'x'."""
    for c in completions:
        if "x" in c:
            raise ValueError(f"cannot score {c!r}")
    return [float(len(c)) for c in completions]


def test_failing_completions_score_zero_and_the_rest_keep_their_scores(caplog):
    g = guard(picky, "demo")
    with caplog.at_level(logging.WARNING, logger="primenb.envs"):
        out = g(prompts=["p"] * 4, completions=["ab", "xx", "abc", "x"], answer=["a"] * 4)
    assert out == [2.0, 0.0, 3.0, 0.0]
    assert (g.failed, g.scored) == (2, 4)
    assert g.__name__ == "picky" and g.__doc__ == picky.__doc__
    (record,) = [r for r in caplog.records if "failed on" in r.getMessage()]
    msg = record.getMessage()
    assert "'demo'" in msg and "'picky'" in msg and "2 of 4 completions" in msg
    assert "ValueError: cannot score 'xx'" in msg
    assert record.exc_info is not None  # the first failure is logged with its traceback


def test_nan_and_non_numbers_count_as_failures_none_stays_none():
    g = guard(lambda prompts, completions, **kw: [math.nan, "high", None, 1, True], "demo")
    assert g(prompts=[""] * 5, completions=[""] * 5) == [0.0, 0.0, None, 1.0, 1.0]
    assert g.failed == 2


def test_contract_violations_stop_with_the_function_named():
    g = guard(lambda prompts, completions, **kw: [1.0], "demo")
    with pytest.raises(RewardFunctionError, match=r"'demo': reward function '<lambda>' returned 1 scores for 3"):
        g(prompts=[""] * 3, completions=["", "", ""])
    g = guard(lambda prompts, completions, **kw: 0.5, "demo")
    with pytest.raises(RewardFunctionError, match="returned float, not a list of 2 scores"):
        g(prompts=[""] * 2, completions=["", ""])


def test_partial_scores_and_stop_run_on_error():
    def partial(prompts, completions, **kw):
        raise PartialScores([1.0, None, 0.25], {1: TimeoutError("judge timed out")})

    g = guard(partial, "demo")
    assert g(prompts=[""] * 3, completions=["a", "b", "c"]) == [1.0, 0.0, 0.25] and g.failed == 1

    def fatal(prompts, completions, **kw):
        raise ConnectionError("scoring server is gone")

    fatal.stop_run_on_error = True
    assert guard(fatal, "demo") is fatal
    with pytest.raises(ConnectionError):
        guard(fatal, "demo")(prompts=[""], completions=[""])


def test_get_environment_guards_every_reward_function_and_eval_scoring_survives():
    def load() -> Environment:
        rows = [{"prompt": "p", "answer": "a"}]
        return Environment(
            id="picky",
            train=rows,
            reward_funcs=[picky, lambda prompts, completions, **kw: [1.0] * len(completions)],
            reward_weights=[1.0, 2.0],
        )

    register_environment("picky-env", load, overwrite=True)
    try:
        env = get_environment("picky-env")
        assert all(isinstance(f, GuardedReward) for f in env.reward_funcs)
        rows = [{"prompt": "p", "answer": "a"}] * 3
        assert env.score(["p"] * 3, ["ab", "xy", ""], rows) == [4.0, 2.0, 2.0]
    finally:
        unregister_environment("picky-env")
