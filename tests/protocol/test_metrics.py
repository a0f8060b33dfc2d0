"""The metrics table (`primenb.protocol.metrics`): one row reaches every view, and no view spells a
metric name of its own."""

from __future__ import annotations

import re
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


# The guard's names come from the table itself (every key, alias, prefix and literal part of a
# pattern): a view spelling any of them, "loss" or "tokens/s" as much as "eval/", fails it.
# Outside the views: the engine writes the names, and the generated sidebar copy is the table's.
NOT_VIEWS = ("primenb/engine/", "primenb/protocol/metrics.py", "labextension/src/documents.ts")
# Files that spell such a word as another vocabulary's: a sample or eval-record field (samples.jsonl,
# evals/<env>.json), a reward hook's name, a config field or hosted-platform key, a tracker's note.
OTHER_VOCABULARY = {
    "primenb/backends/hosted_mirror.py": {"reward"},  # a hosted sample's field
    "primenb/config/limits.py": {"lr"},  # the config field
    "primenb/config/migrate.py": {"learning_rate", "loss"},  # hosted-config keys with no prime-rl twin
    "primenb/config/schema/common.py": {"reward", "loss"},  # [primenb.monitor] metrics' default
    "primenb/config/synonyms.py": {"learning_rate", "lr"},
    "primenb/envs/base.py": {"reward"},  # a reward function's fallback name
    "primenb/envs/catalog.py": {"reward"},
    "primenb/envs/guard.py": {"reward"},
    "primenb/envs/verifiers_adapter.py": {"reward"},  # the verifiers hook kind
    "primenb/notebook/builder.py": {"lr"},  # the config form's field
    "primenb/notebook/form_fields.py": {"lr"},
    "primenb/protocol/fields.py": {"lr"},
    "primenb/protocol/index.py": {"lr"},  # the index's config column
    "primenb/protocol/rundir.py": {"reward"},  # samples.jsonl's fields, in its docstring
    "primenb/render/summary.py": {"reward"},  # a sample's reward
    "primenb/render/tidy.py": {"reward"},  # the samples DataFrame's columns
    "primenb/serve/episode_eval.py": {"reward"},  # eval-record fields
    "primenb/serve/eval_stats.py": {"reward"},
    "primenb/serve/evaluate.py": {"reward", "reward_std"},
    "primenb/serve/vf_eval.py": {"reward"},
    "primenb/server/data.py": {"reward"},  # a sample's fields
    "primenb/traces/evals.py": {"reward_std"},  # evals/<env>.json's summary
    "primenb/traces/table.py": {"lr", "reward"},  # config column; final_reward's header
    "primenb/traces/trace.py": {"reward"},  # a sample's reward
    "primenb/trackers/sinks.py": {"reward_errors"},  # a comment on MLflow's file store
}
HAND_WRITTEN_TS = re.compile(r"SPARK_KEYS = \[|CURVE_KEYS = ")


def metric_words() -> set[str]:
    """Every spelling the table owns: names, aliases, prefixes and the literal parts of patterns."""
    words = {M.WARMUP_PREFIX, M.EVAL_PREFIX}
    for m in M.METRICS:
        words.update(part for part in re.split(r"<\w+>", m.key) if part)
        words.update(m.aliases)
    return words


def spellings(root: Path) -> dict[str, set[str]]:
    """The quoted metric words (and hand-written sidebar key lists) in each view file under ``root``."""
    words = sorted(metric_words(), key=len, reverse=True)
    quoted = re.compile(r"([\"'])(" + "|".join(re.escape(w) for w in words) + r")\1")
    files = [*(root / "primenb").rglob("*.py"), *(root / "labextension" / "src").rglob("*.ts")]
    found: dict[str, set[str]] = {}
    for path in files:
        name = path.relative_to(root).as_posix()
        if name.startswith(NOT_VIEWS):
            continue
        text = path.read_text(encoding="utf-8")
        seen = {m.group(2) for m in quoted.finditer(text)} | set(HAND_WRITTEN_TS.findall(text))
        if seen - OTHER_VOCABULARY.get(name, set()):
            found[name] = seen - OTHER_VOCABULARY.get(name, set())
    return found


def test_no_view_spells_a_metric_name_of_its_own() -> None:
    views = spellings(ROOT)
    assert views == {}, f"parse metric names through primenb.protocol.metrics, not in {views}"


@pytest.mark.parametrize("spelled", ['"loss"', "'tokens/s'", '"eval/"', '"rewards/mean"'])
def test_the_guard_catches_a_view_spelling_any_name_of_the_table(tmp_path: Path, spelled: str) -> None:
    """A copy of the views with one metric name spelled in the panels: the guard names the file."""
    view = tmp_path / "primenb" / "render" / "panels.py"
    view.parent.mkdir(parents=True)
    view.write_text((ROOT / "primenb/render/panels.py").read_text() + f"\nFIRST = {spelled}\n")
    assert spellings(tmp_path) == {"primenb/render/panels.py": {spelled.strip("\"'")}}
