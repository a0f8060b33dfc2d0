"""The metrics table (`primenb.protocol.metrics`): one row reaches every view, and no view spells a
metric name of its own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from primenb.protocol import metrics as M
from primenb.protocol.metrics import Metric

ROOT = Path(__file__).resolve().parents[2]

# a metric TRL's GRPO logs that primenb does not show yet: added here by one row
KL = Metric("kl", "KL divergence", (M.RL,), M.LOWER, shown=frozenset(M.VIEWS) - {M.PICK, M.HEALTH})


def rl_rows() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"step": 0, "phase": "rl", "eval/rt/reward": 0.1}]
    rows += [{"step": s, "phase": "rl", "reward": 0.1 * s, "loss": 1.0 / s, "kl": 0.01 * s} for s in (1, 2, 3)]
    return rows


@pytest.fixture
def with_kl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(M, "METRICS", (*M.METRICS, KL))


@pytest.mark.usefixtures("with_kl")
def test_one_new_row_reaches_the_monitor_summary_trace_compare_tidy_and_sidebar() -> None:
    from primenb.protocol.record import metrics_summary
    from primenb.protocol.tsgen import render
    from primenb.render.panels import panels
    from primenb.render.summary import charts_html, headline
    from primenb.render.tidy import metric_columns
    from primenb.traces.comparison import default_metrics

    rows = rl_rows()
    keys = {k for r in rows for k in r} - {"step", "phase"}
    monitor = panels("rl", keys, None)
    assert [p.title for p in monitor] == ["train reward (± std)", "eval reward", "loss", "KL divergence"]
    assert "KL divergence" in re.sub(r"<[^>]+>", " ", charts_html(rows))
    assert "kl" not in headline({}, rows)  # the headline shows main metrics and evals only
    summary = metrics_summary(rows)
    assert summary["curves"]["kl"]["best"] == pytest.approx(0.01)  # lower is better: the table says
    assert summary["curves"]["kl"]["best_step"] == 1
    assert default_metrics([rows]) == ["reward", "eval/rt/reward", "loss", "kl"]  # compare and the trace view
    assert metric_columns(["phase", "step", "time", "kl", "grad_norm", "loss", "reward"]) == [
        "phase",
        "step",
        "time",
        "reward",
        "loss",
        "grad_norm",
        "kl",
    ]
    spark = re.search(r"export const SPARK_KEYS: ReadonlyArray<string> = (.*);", render())
    assert spark is not None and spark.group(1) == '["reward", "loss", "warmup/loss", "kl"]'
    assert '"key": "kl", "label": "KL divergence"' in render()


def test_without_the_row_no_view_shows_it() -> None:
    from primenb.protocol.record import metrics_summary
    from primenb.render.panels import panels
    from primenb.traces.comparison import default_metrics

    rows = rl_rows()
    keys = {k for r in rows for k in r} - {"step", "phase"}
    assert "kl" not in [k for p in panels("rl", keys, None) for k in p.keys]
    assert "kl" not in metrics_summary(rows)["curves"] and "kl" not in default_metrics([rows])
    assert "kl" not in M.SPARK_KEYS


def test_keys_are_matched_through_aliases_patterns_and_the_warm_up_prefix() -> None:
    assert M.match("rewards/mean") is M.by_key("reward")  # TRL's name
    assert M.match("warmup/loss") is M.by_key("loss")
    assert M.match("eval/owner/env/reward") is M.by_key(M.EVAL_REWARD)  # an env id may hold "/"
    assert M.match("eval/rt/num_examples") is M.by_key(M.EVAL_EXAMPLES)
    assert M.match("no_such_metric") is None
    assert M.eval_keys({"eval/b/reward", "eval/a/reward", "warmup/eval/a/reward", "eval/a/exact_match"}) == [
        "eval/a/reward",
        "eval/b/reward",
    ]
    assert M.eval_keys({"eval/a/reward", "warmup/eval/a/reward"}, warm=True) == ["warmup/eval/a/reward"]
    assert M.first_present("reward", {"train/reward", "loss"}) == "train/reward"
    assert M.higher_is_better("eval/a/reward") is True and M.higher_is_better("warmup/loss") is False
    assert M.label("warmup/loss") == "SFT warm-up loss" and M.label("whatever") == "whatever"
    assert M.label("warmup/mean_token_accuracy") == "warm-up token accuracy" and M.label("loss") == "loss"
    assert M.is_timing_key("warmup/train_runtime") and M.is_timing_key("tokens/s") and not M.is_timing_key("loss")


def test_the_main_metrics_and_the_headline() -> None:
    assert M.main_keys() == {"rl": "reward", "sft": "loss"}
    assert M.SPARK_KEYS == ("reward", "loss", "warmup/loss")
    assert M.HEALTH_KEYS == ("reward_calls", "reward_errors", "reward_errors/*")
    assert M.final_fields() == {"reward": "final_reward", "loss": "final_loss"}
    assert M.headline_keys({"reward", "loss", "grad_norm", "eval/a/reward"}) == ["reward", "loss", "eval/a/reward"]
    # still in the SFT warm-up of an RL run: the warm-up's loss
    assert M.headline_keys({"warmup/loss", "warmup/grad_norm"}) == ["warmup/loss"]
    assert M.with_main_names({"reward/mean": 0.5, "loss": 0.1}) == {"reward/mean": 0.5, "loss": 0.1, "reward": 0.5}


def test_a_bad_row_fails_at_import_not_in_a_view() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        M._check((*M.METRICS, Metric("loss", "again", (M.SFT,))))
    with pytest.raises(ValueError, match="phases"):
        M._check((Metric("x", "x", ("pretraining",)),))
    with pytest.raises(ValueError, match="shown"):
        M._check((Metric("x", "x", (M.RL,), shown=frozenset({"dashboard"})),))


# The count of the closing note: files outside the engine (which writes the names) and this table
# that spell a metric name or prefix. serve/evaluate.py and traces/evals.py name fields of the
# %prime_eval result document (evals/<env>.json: reward_mean, reward_std), not metrics.jsonl keys.
NAME_PATTERN = (
    r"[\"'](eval/|warmup/|/reward|reward_std|rewards/mean|train/reward|warmup/loss|grad_norm|mean_token_accuracy)[\"']"
    r"|SPARK_KEYS = \[|CURVE_KEYS = "
)
NOT_VIEWS = ("primenb/engine/", "primenb/protocol/metrics.py", "labextension/src/documents.ts")
EVAL_DOCUMENT = ("primenb/serve/evaluate.py", "primenb/traces/evals.py")


def test_no_view_spells_a_metric_name_of_its_own() -> None:
    found = subprocess.run(
        ["grep", "-rlE", NAME_PATTERN, "primenb", "labextension/src", "--include=*.py", "--include=*.ts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    views = sorted(f for f in found if not f.startswith(NOT_VIEWS) and f not in EVAL_DOCUMENT)
    assert views == [], f"parse metric names through primenb.protocol.metrics, not in {views}"
