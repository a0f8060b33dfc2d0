"""SFT samples under the time budget still reach the monitor: a set at the start and at the end,
one set per step, and `Run.samples` / `Run.metrics` shaped for reading (trains: slow)."""

from __future__ import annotations

import pandas as pd
import pytest

from primenb import load_config
from primenb.backends.local import submit
from primenb.engine.train import SFT_SAMPLE_PROMPTS

from ..tiny import sft_toml

pytestmark = pytest.mark.slow  # trains a tiny model in a subprocess

STEPS = 12


def test_budgeted_sft_samples_still_come_at_start_and_end(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    # sample_every = 1 asks for a set every step: the time budget decides how many are drawn
    toml = sft_toml(
        steps=STEPS,
        model="primenb/tiny-byte-xs",
        batch_size=8,
        seq_len=48,
        primenb="seed = 1\nlogging_steps = 1\nsample_every = 1",
    )
    run = submit(load_config(toml), name="samples")
    assert run.wait(timeout=600) == "completed", run.logs(80)

    samples = run.samples
    per_step = samples.groupby("step").size()
    assert {0, STEPS} <= set(per_step.index)  # fresh samples at the start and of the final model
    assert set(per_step.index) <= set(range(STEPS + 1))
    assert (per_step == SFT_SAMPLE_PROMPTS).all()  # one set per step (never twice at the last step)
    assert samples["completion"].map(lambda c: isinstance(c, str)).all()
    assert isinstance(samples["time"].iloc[0], pd.Timestamp)

    metrics = run.metrics  # one row per step: the train log and TRL's end row merged
    assert list(metrics["step"]) == list(range(1, STEPS + 1))
    assert set(metrics["phase"]) == {"sft"} and metrics["loss"].notna().all()
