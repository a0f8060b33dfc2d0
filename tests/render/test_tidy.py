"""The tidy DataFrames and log text people read in a notebook: `Run.metrics`, `Run.samples`,
`Run.logs`, built from synthetic run directories (fast; nothing trains)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from IPython.lib.pretty import pretty

from primenb.render.tidy import LogText, metrics_frame, samples_frame, samples_html
from primenb.run import Run

T0 = 1_796_000_000.0

# What an RL run with an SFT warm-up writes today (no "phase" field): warm-up eval and logs under
# warmup/*, then the RL eval at step 0, train logs, eval rows and TRL's end row at the last step.
WARMUP_THEN_RL = [
    {"step": 0, "time": T0, "warmup/eval/rt/reward": 0.0, "warmup/eval/rt/num_examples": 16},
    {"step": 1, "time": T0 + 1, "warmup/loss": 5.7, "warmup/learning_rate": 0.001, "warmup/grad_norm": 5.6},
    {"step": 2, "time": T0 + 2, "warmup/loss": 4.1, "warmup/learning_rate": 0.001, "warmup/grad_norm": 3.2},
    {"step": 0, "time": T0 + 3, "eval/rt/reward": 0.1, "eval/rt/exact_match": 0.0, "eval/rt/num_examples": 16},
    {
        "step": 1,
        "time": T0 + 4,
        "loss": 0.01,
        "grad_norm": 0.3,
        "learning_rate": 5e-5,
        "reward": 0.2,
        "reward_std": 0.1,
    },
    {"step": 2, "time": T0 + 5, "loss": 0.02, "grad_norm": 0.4, "learning_rate": 5e-5, "reward": 0.3, "tokens/s": 90.0},
    {"step": 2, "time": T0 + 6, "eval/rt/reward": 0.4, "eval/rt/exact_match": 0.25, "eval/rt/num_examples": 16},
    {"step": 2, "time": T0 + 7, "train_runtime": 9.0, "train_loss": 0.015, "tokens/s": 0.0},
]


def _run_dir(tmp_path: Path, metrics: list[Any] | str = (), samples: list[Any] = (), log: str = "") -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"state": "completed", "step": 2, "max_steps": 2}))
    text = metrics if isinstance(metrics, str) else "".join(json.dumps(r) + "\n" for r in metrics)
    (run / "metrics.jsonl").write_text(text)
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples))
    if log:
        (run / "logs" / "engine.log").write_text(log)
    return run


def test_metrics_one_row_per_phase_and_step_with_warmup_split_from_rl(tmp_path: Path) -> None:
    df = Run(_run_dir(tmp_path, WARMUP_THEN_RL)).metrics
    assert list(zip(df["phase"], df["step"], strict=True)) == [
        ("sft warmup", 0),
        ("sft warmup", 1),
        ("sft warmup", 2),
        ("training", 0),
        ("training", 1),
        ("training", 2),
    ]
    assert not [c for c in df.columns if c.startswith("warmup/")]  # the prefix became the phase
    warm = df[df["phase"] == "sft warmup"].set_index("step")
    rl = df[df["phase"] == "training"].set_index("step")
    assert warm.loc[2, "loss"] == 4.1 and warm.loc[0, "eval/rt/reward"] == 0.0
    # the train row, the eval row and TRL's end row of step 2 are one row
    assert rl.loc[2, "loss"] == 0.02 and rl.loc[2, "eval/rt/reward"] == 0.4 and rl.loc[2, "train_runtime"] == 9.0
    assert rl.loc[2, "tokens/s"] == 90.0  # the end row's 0.0 does not overwrite the step's rate
    assert rl.loc[2, "time"] == pd.Timestamp(T0 + 5, unit="s", tz="UTC")  # the step's first record
    assert pd.isna(rl.loc[0, "loss"]) and rl.loc[0, "eval/rt/reward"] == 0.1


def test_metrics_columns_lead_with_what_people_read(tmp_path: Path) -> None:
    df = Run(_run_dir(tmp_path, WARMUP_THEN_RL)).metrics
    lead = [
        "phase",
        "step",
        "time",
        "reward",
        "reward_std",
        "eval/rt/reward",
        "eval/rt/exact_match",
        "loss",
        "learning_rate",
        "grad_norm",
        "tokens/s",
    ]
    assert list(df.columns[: len(lead)]) == lead
    assert str(df["time"].dtype).startswith("datetime64") and str(df["time"].dt.tz) == "UTC"
    assert df["step"].dtype == "int64"
    assert not df.isna().all().any()  # no column is empty
    text = df.to_string()  # times read as dates, not epoch floats
    assert "2026-" in text and "1796000000" not in text


def test_metrics_use_the_phase_field_when_the_engine_writes_one() -> None:
    rows = [
        {"step": 1, "time": T0, "phase": "sft warmup", "loss": 3.0},
        {"step": 1, "time": T0 + 1, "phase": "training", "loss": 0.1, "reward": 0.5},
        {"step": 1, "time": T0 + 2, "phase": "training", "eval/rt/reward": 0.6},
        {"step": 2, "time": T0 + 3, "phase": "<b>" + "x" * 500, "loss": 0.2},  # hostile label: kept short
    ]
    df = metrics_frame(rows)
    assert list(df["phase"])[:2] == ["sft warmup", "training"]
    assert df.loc[1, "reward"] == 0.5 and df.loc[1, "eval/rt/reward"] == 0.6
    assert len(df.loc[2, "phase"]) == 40


def test_metrics_from_odd_rows_missing_time_nan_and_junk() -> None:
    rows: list[Any] = [
        {"step": 3, "loss": 0.5},  # no time at all
        {"step": 1, "time": "yesterday", "loss": float("nan"), "reward": 0.1},  # NaN dropped, time unreadable
        {"step": "2", "loss": 9.0},  # not an int step: not a metrics row
        [1, 2],
        {"step": 2, "time": T0, "loss": 0.7, "note": "text"},
    ]
    df = metrics_frame(rows)
    assert list(df["step"]) == [1, 2, 3]  # steps sorted within the phase
    assert df["time"].isna().tolist() == [True, False, True]
    assert pd.isna(df.loc[0, "loss"]) and df.loc[0, "reward"] == 0.1
    assert "note" not in df.columns
    empty = metrics_frame([])
    assert empty.empty and list(empty.columns) == ["phase", "step", "time"]


def test_raw_metrics_stay_reachable(tmp_path: Path) -> None:
    run = Run(_run_dir(tmp_path, WARMUP_THEN_RL))
    raw = run.metrics_raw
    assert len(raw) == len(WARMUP_THEN_RL) and raw["time"].iloc[0] == T0
    assert "warmup/loss" in raw.columns
    assert run.metric_rows()[1]["warmup/loss"] == 5.7


SAMPLES = [
    {
        "step": 1,
        "time": T0,
        "task": "rt",
        "prompt": "abc=",
        "completion": "<reversed_text>cba</reversed_text>\nsecond line",
        "reward": 0.9,
        "rewards": {"lcs": 0.8, "format": 1.0},
        "answer": "cba",
    },
    {
        "step": 1,
        "time": T0 + 1,
        "task": "rt",
        "prompt": "xy=",
        "completion": "<script>alert(1)</script>",
        "reward": None,
    },
    {"step": 0, "task": "rt", "prompt": "q", "completion": "a", "reward": 0.0, "correct": False},  # SFT sample, no time
]


def test_samples_flatten_rewards_and_time(tmp_path: Path) -> None:
    df = Run(_run_dir(tmp_path, samples=SAMPLES)).samples
    assert list(df.columns[:8]) == ["step", "time", "task", "prompt", "completion", "answer", "reward", "correct"]
    assert df.loc[0, "rewards/lcs"] == 0.8 and df.loc[0, "rewards/format"] == 1.0
    assert "rewards" not in df.columns  # no dict reprs
    assert df.loc[0, "time"] == pd.Timestamp(T0, unit="s", tz="UTC") and pd.isna(df.loc[2, "time"])
    assert df["step"].dtype == "int64"
    assert pd.isna(df.loc[1, "reward"])
    assert Run(_run_dir(tmp_path / "b", samples=SAMPLES)).samples_raw.loc[0, "rewards"] == {"lcs": 0.8, "format": 1.0}


def test_samples_html_left_aligns_wraps_and_escapes(tmp_path: Path) -> None:
    df = Run(_run_dir(tmp_path, samples=SAMPLES)).samples
    page = df._repr_html_()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "text-align:left;white-space:pre-wrap" in page
    assert "2026-" in page and "{" not in page.split("<tbody>")[1]  # no dict repr in any cell
    filtered = df[df["reward"] > 0.5]  # filtering keeps the readable view
    assert len(filtered) == 1 and "text-align:left" in filtered._repr_html_()
    many = samples_frame([{"step": i, "completion": f"c{i}"} for i in range(100)])
    page = samples_html(many, max_rows=10)
    assert "c0<" in page and "c99<" in page and "c50<" not in page and "90 more rows" in page


def test_logs_read_as_lines_in_a_terminal_and_a_notebook(tmp_path: Path) -> None:
    log = "".join(f"2026-12-03 04:00:0{i} INFO [primenb.engine] line {i} <tag>\n" for i in range(5))
    logs = Run(_run_dir(tmp_path, log=log + "\x1b[31mred\x1b[0m warning\n")).logs(3)
    assert isinstance(logs, str) and isinstance(logs, LogText)
    assert logs.splitlines() == [
        "2026-12-03 04:00:03 INFO [primenb.engine] line 3 <tag>",
        "2026-12-03 04:00:04 INFO [primenb.engine] line 4 <tag>",
        "red warning",
    ]
    assert repr(logs) == str(logs) and pretty(logs) == str(logs)  # no quotes, no \n escapes
    assert "&lt;tag&gt;" in logs._repr_html_() and "<pre" in logs._repr_html_()
    assert "no log lines" in Run(_run_dir(tmp_path / "b")).logs()._repr_html_()


@pytest.mark.parametrize("bad", ["", "\n\n", "not json\n", '{"step": null}\n'])
def test_frames_of_empty_or_broken_files(tmp_path: Path, bad: str) -> None:
    run = Run(_run_dir(tmp_path, bad))
    assert run.metrics.empty and run.samples.empty


def test_a_trace_shows_the_same_tidy_frames(tmp_path: Path) -> None:
    from primenb.protocol.record import write_trace
    from primenb.traces.trace import Trace
    from tests.harness.synth import make_doc

    run_dir = _run_dir(tmp_path, WARMUP_THEN_RL, SAMPLES)
    write_trace(run_dir, make_doc(1))
    trace = Trace.load(run_dir)
    pd.testing.assert_frame_equal(trace.metrics, Run(run_dir).metrics)
    assert "rewards/lcs" in trace.samples.columns and "text-align:left" in trace.samples._repr_html_()
