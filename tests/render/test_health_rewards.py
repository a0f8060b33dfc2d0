"""Reward functions that raise, named in the run's warnings (the monitor's and the summary's), in
place of "no learning signal, try a longer warm-up" when the failures explain the flat reward."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from primenb.render.health import check


def rows(
    steps: int, *, calls: int = 8, failures: dict[str, int] | None = None, std: float = 0.0
) -> list[dict[str, Any]]:
    out = []
    for step in range(1, steps + 1):
        row: dict[str, Any] = {"step": step, "phase": "rl", "reward": 0.0, "reward_std": std, "loss": 0.0}
        row["frac_reward_zero_std"] = 1.0 if std == 0 else 0.25
        row["reward_calls"] = calls
        row["reward_errors"] = sum((failures or {}).values())
        row.update({f"reward_errors/{name}": n for name, n in (failures or {}).items()})
        out.append(row)
    return out


def test_a_reward_function_failing_everywhere_is_named_instead_of_the_warmup_advice() -> None:
    messages = check(rows(4, failures={"exact_match": 8}))
    assert len(messages) == 1, messages
    assert "no learning signal because reward function exact_match failed on 32 of 32 completions" in messages[0]
    assert "longer SFT warm-up" not in messages[0] and "run.logs()" in messages[0]


def test_a_few_failures_are_reported_without_hiding_the_flat_reward_advice() -> None:
    messages = check(rows(4, failures={"fmt": 1}))
    assert messages[0].startswith("reward function fmt failed on 4 of 32 completions")
    assert any("Try a longer SFT warm-up" in m for m in messages[1:])


def test_failures_with_learning_signal_are_still_reported_most_failing_first() -> None:
    messages = check(rows(2, failures={"a": 1, "b": 3}, std=0.2))
    assert messages == [
        "reward function b failed on 6 of 16 completions; reward function a failed on 2 of 16 completions "
        "(a call that raises scores 0; its error is in the run's log: run.logs())."
    ]


def test_no_failures_keep_the_old_advice_and_warmup_rows_do_not_count() -> None:
    warm = [{"step": 1, "phase": "sft warmup", "warmup/loss": 1.0, "reward_errors/x": 5}]
    messages = check(warm + rows(4))
    assert len(messages) == 1 and "Try a longer SFT warm-up" in messages[0]


def test_the_summary_names_the_failing_function(tmp_path: Path) -> None:
    from tests.notebook.test_monitor import make_run

    run = make_run(tmp_path / "bad", {"state": "completed", "step": 4}, rows(4, failures={"<b>mine</b>": 8}))
    page = run._repr_html_()
    assert "reward function &lt;b&gt;mine&lt;/b&gt; failed on 32 of 32 completions" in page
    assert "longer SFT warm-up" not in page
