"""Issue 31, eval: a reward's numbers, hangs and exceptions, and the eval's sampling values.
Rewards are scored as ``env add`` scores them (bounded in time, a non-finite value scored 0.0), a
sum past float's range never crashes the summary or the stored file, and under
``data_collection = "deny"`` a reward's exception never shows the prompt or completion it quotes
(with a control run that shows it when deny is off)."""

from __future__ import annotations

import json
import logging
import math
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primenb.envs import catalog
from primenb.envs.base import Environment
from primenb.envs.guard import guard
from primenb.errors import PrimenbError
from primenb.protocol.privacy import is_private, private_while
from primenb.serve import eval_stats, evaluate

MARKER = "PRIVATE-MARKER-7f3a"
ROWS = [{"prompt": f"say {MARKER} {i}", "answer": "x"} for i in range(3)]


def _env(*funcs: Any) -> Environment:
    return Environment(id="t", eval=ROWS, reward_funcs=list(funcs))


def _huge(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    return [1e308 for _ in completions]


def _odd(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    return [{"a": math.inf, "b": math.nan}.get(c, 10**400) for c in completions]


def _raises(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
    raise ValueError(f"cannot score {prompts[0]!r} -> {completions[0]!r}")


@pytest.mark.parametrize(
    ("temperature", "max_tokens", "says"),
    [
        (math.nan, None, "--temperature"),
        (math.inf, None, "--temperature"),
        (-0.1, None, "--temperature"),
        (2.5, None, "--temperature"),
        (True, None, "--temperature"),
        (0.0, 0, "--max-tokens"),
        (0.0, -3, "--max-tokens"),
        (0.0, True, "--max-tokens"),
    ],
)
def test_sampling_values_are_refused_before_anything_runs(temperature: Any, max_tokens: Any, says: str) -> None:
    with pytest.raises(PrimenbError, match=says):
        evaluate.evaluate(["no-such-trace"], "reverse-text", temperature=temperature, max_tokens=max_tokens)
    evaluate.check_sampling(0.7, 16)  # control: in range passes
    evaluate.check_sampling(0, None)


def test_huge_and_non_finite_rewards_never_crash_the_summary_or_the_stored_file() -> None:
    """Two functions returning 1e308 (issue 42): each function's score is kept as returned, but
    the weighted total is clamped term by term (a `RewardTotalWarning` naming the environment),
    so the total, the mean and its interval are finite numbers, never inf or NaN."""
    from primenb.envs.guard import MAX_TERM, RewardTotalWarning

    with pytest.warns(RewardTotalWarning, match="environment 't'"):
        per_func, totals = evaluate._score_all(_env(_huge, _huge, _odd), ROWS, ["a", "b", "c"])
    assert per_func["_huge"] == [1e308] * 3
    assert per_func["_odd"] == [0.0] * 3  # inf, nan, 10**400: not finite numbers, scored 0.0
    assert totals == [2 * MAX_TERM] * 3  # 1e308 + 1e308 was inf before: now each term is clamped
    records = [{"example": i, "reward": t} for i, t in enumerate(totals)]
    mean, low, high = eval_stats.interval(records)
    assert all(isinstance(x, float) and math.isfinite(x) for x in (mean, low, high))
    with pytest.warns(RewardTotalWarning):  # the engine's and `Environment.score`'s total: the same rule
        assert _env(_huge, _huge).score(["p"] * 3, ["a", "b", "c"], ROWS) == [2 * MAX_TERM] * 3
    assert eval_stats.mean([1e308, 1e308]) == 1e308  # fsum alone raises OverflowError here
    assert math.isnan(eval_stats.stdev([math.inf, -math.inf]))
    stored = evaluate._finite({"summary": {"reward_mean": math.inf, "ci95_low": math.nan, "n": 3}})
    assert json.loads(json.dumps(stored, allow_nan=False)) == {
        "summary": {"reward_mean": None, "ci95_low": None, "n": 3}
    }


@pytest.mark.parametrize("text", ["5", " 2 ", "1e3", "nan", b"1", bytearray(b"7"), ""])
def test_text_is_never_a_score_on_any_road(text: Any) -> None:
    """float("5") is 5.0: a reward returning text would score it. Training's guard, `env add` and
    eval (`score_each`) and the summary all refuse it as the same error, scored 0.0."""

    def says_text(prompts: list[Any], completions: list[Any], **_: Any) -> list[Any]:
        return [text for _ in completions]

    def says_number(prompts: list[Any], completions: list[Any], **_: Any) -> list[Any]:
        return [5 for _ in completions]

    per_func, totals = evaluate._score_all(_env(says_text, says_number), ROWS, ["a", "b", "c"])
    assert per_func["says_text"] == [0.0] * 3 and per_func["says_number"] == [5.0] * 3
    assert totals == [5.0] * 3
    _, by_func = catalog.score_each(_env(says_text), ROWS[0], "a")
    assert isinstance(by_func["says_text"], str) and "not a number" in by_func["says_text"]
    assert guard(says_text, "t")(prompts=["p"], completions=["c"]) == [0.0]  # counted as failed, as a raise is


def test_a_hanging_reward_stops_the_eval_with_what_to_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hangs(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        release.wait(60)
        return [1.0]

    monkeypatch.setattr(catalog, "REWARD_CALL_TIMEOUT", 0.2)
    try:
        with pytest.raises(PrimenbError, match=r"did not return within 0\.2 s"):
            evaluate._score_all(_env(hangs), ROWS, ["a", "b", "c"])
    finally:
        release.set()  # the abandoned call ends


@pytest.mark.parametrize("deny", [True, False])
def test_deny_withholds_a_reward_exception_in_eval(
    deny: bool, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    with private_while(deny):
        assert is_private() is deny
        per_func, _ = evaluate._score_all(_env(_raises), ROWS, [f"reply {MARKER}"] * 3)
        # the verifiers path calls the registry's guarded function: its log must hold too
        guard(_raises, "t")(prompts=[ROWS[0]["prompt"]], completions=[f"reply {MARKER}"])
    assert not is_private()  # the kernel's own mode is back
    assert per_func["_raises"] == [0.0] * 3
    out = capsys.readouterr()
    shown = out.out + out.err + caplog.text + "".join(str(r.exc_info) for r in caplog.records)
    assert ("failed on 3 of 3" in caplog.text) and ("ValueError" in caplog.text)
    if deny:
        assert MARKER not in shown
        assert all(r.exc_info is None for r in caplog.records)
    else:  # control: the same run without deny shows the quoted text, so the check above can fail
        assert MARKER in shown


@settings(max_examples=200, deadline=None)
@given(
    terms=st.lists(
        st.tuples(
            st.floats(-1e308, 1e308, allow_nan=False) | st.sampled_from([1.0, -1.0, 0.5]),
            st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e308, -1e308, 0.0]),
        ),
        max_size=6,
    )
)
def test_a_weighted_total_is_always_finite_and_exact_when_it_can_be(terms: list[tuple[float, float]]) -> None:
    import warnings

    from primenb.envs.guard import MAX_TERM, weighted_total

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        total = weighted_total(terms, "t")
    assert math.isfinite(total)
    products = [w * v for w, v in terms]
    if all(math.isfinite(p) and abs(p) <= MAX_TERM for p in products):
        assert total == sum(products)  # nothing clamped: the plain weighted sum
