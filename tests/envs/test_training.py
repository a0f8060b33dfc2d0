"""Real tiny GRPO runs (the engine in its own process) against a registered environment, a
reward function that raises on some completions, and a verifiers taskset."""

from __future__ import annotations

from pathlib import Path

import pytest

from primenb import load_config
from primenb.backends import submit
from primenb.envs.manage import add

from ..tiny import rl_toml
from .conftest import GOOD_ENV, RAISING_ENV, write

pytestmark = pytest.mark.slow  # trains real (tiny) models in subprocesses


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _train(env_id: str, name: str, args: str = "", primenb: str = "") -> object:
    settings = "sample_every = 1\n" + primenb
    run = submit(
        load_config(rl_toml(steps=3, env=env_id, env_args=args, seq_len=64, max_tokens=6, primenb=settings)),
        name=name,
    )
    assert run.wait(timeout=300) == "completed", run.logs()
    return run


def _reward_means(run: object) -> dict[str, list[float]]:
    rows = run.metric_rows()  # type: ignore[attr-defined]
    keys = sorted({k for r in rows for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    return {k: [r[k] for r in rows if k in r] for k in keys}


def test_a_registered_environment_trains_with_one_metric_per_reward_function(workdir, tmp_path):
    write(tmp_path / "envs" / "echo_digit" / "echo_digit.py", GOOD_ENV)
    add(str(tmp_path / "envs" / "echo_digit"))
    run = _train("echo-digit", "custom", "num_examples = 40\n")
    means = _reward_means(run)
    assert set(means) == {"rewards/first_char/mean", "rewards/short/mean"}
    assert len(means["rewards/short/mean"]) == 3
    rows = [r for r in run.metric_rows() if "reward" in r]  # type: ignore[attr-defined]
    assert len(rows) == 3 and all(r["rewards/short/mean"] > 0 for r in rows)
    for row in rows:  # the weighted total: first_char x 1.0 + short x 0.5
        expected = row["rewards/first_char/mean"] + 0.5 * row["rewards/short/mean"]
        assert row["reward"] == pytest.approx(expected, abs=1e-5)
    samples = run.samples  # type: ignore[attr-defined]
    assert set(samples["answer"]) <= set("0123456789")


def test_a_reward_function_that_raises_on_some_completions_does_not_stop_the_run(workdir, tmp_path):
    write(tmp_path / "envs" / "raising.py", RAISING_ENV)
    add(str(tmp_path / "envs" / "raising.py"))
    # 'strict' fails on most of a random model's completions: under the limit they score 0.0
    run = _train("raising", "raising", primenb="reward_error_limit = 1.0")
    means = _reward_means(run)
    assert set(means) == {"rewards/strict/mean", "rewards/anything/mean"}
    assert len(means["rewards/strict/mean"]) == 3
    assert all(0.0 <= v <= 1.0 for v in means["rewards/strict/mean"])
    log = (run.dir / "logs" / "engine.log").read_text()  # type: ignore[attr-defined]
    assert "environment 'raising', reward function 'strict': failed on" in log
    assert "ValueError: no digit in the reply" in log


def test_a_verifiers_taskset_trains_through_the_same_path(workdir, tasksets):
    run = _train("echo-words", "vf", "num_tasks = 30\n")
    means = _reward_means(run)
    assert set(means) == {"rewards/exact/mean", "rewards/starts/mean"}
    assert len(means["rewards/exact/mean"]) == 3
    samples = run.samples  # type: ignore[attr-defined]
    assert set(samples["answer"]) <= {"ab", "ba", "cab", "abc", "bca"}
