"""Launching real (tiny) runs from the magics and the CLI, following, stopping, re-attaching."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from primenb import load_config
from primenb.backends import attach
from primenb.backends.local import prepare
from primenb.errors import PrimenbError
from primenb.notebook.monitor import MetricSeries, Monitor
from primenb.run import Run

from ..polling import wait_for
from ..tiny import rl_toml, sft_toml

pytestmark = pytest.mark.slow  # trains real (tiny) models in subprocesses


def sft_quick(steps: int, ckpt: int) -> str:
    return sft_toml(steps=steps, ckpt_interval=ckpt)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    return tmp_path


def test_magic_wait_trains_and_fills_the_run_directory(shell, workdir):
    shell.run_cell(f"%%rltoml cfg\n{sft_quick(steps=6, ckpt=3)}")
    result = shell.run_cell("run = %prime_train cfg --name quick --wait")
    assert result.success, result.error_in_exec
    run = shell.user_ns["run"]
    assert isinstance(run, Run) and run.dir == (workdir / "outputs" / "quick").resolve()
    assert run.state == "completed", run.logs()
    for name in ("configs/resolved.json", "configs/config.toml", "status.json", "metrics.jsonl", "launcher.json"):
        assert (run.dir / name).exists(), name
    metrics = run.metrics
    assert "loss" in metrics.columns and metrics["step"].max() == 6
    assert [p.name for p in run.checkpoints][-1] == "step_6"
    resolved = json.loads((run.dir / "configs" / "resolved.json").read_text())
    assert resolved["primenb"]["seed"] == 1 and resolved["run"]["name"] == "quick"


def test_launch_returns_at_once_then_stop_saves_a_final_checkpoint(shell, workdir):
    (workdir / "sft.toml").write_text(sft_quick(steps=100000, ckpt=100000))
    t0 = time.monotonic()
    assert shell.run_cell("%prime_train sft.toml --name long").success
    assert time.monotonic() - t0 < 10  # the kernel is free while the run trains
    run = shell.user_ns["_"]
    assert run.name == "long" and run.state in ("queued", "running")
    wait_for(lambda: len(run.metric_rows()) >= 3, what=run.logs)
    assert shell.run_cell("%prime_train --stop long --wait").success  # plain --stop returns at once
    assert run.state == "stopped"
    assert run.checkpoints, "a stopped run keeps a final checkpoint"
    assert run.status["step"] >= 3


def test_attach_after_kernel_restart_sees_full_history_and_follows(workdir):
    config = load_config(sft_quick(steps=40, ckpt=100))
    from primenb.backends import submit

    launched = submit(config, name="attachme")
    wait_for(lambda: len(launched.metric_rows()) >= 2, what=launched.logs)
    again = attach("attachme")  # what a fresh kernel does: no process handle, only files
    assert again.dir == launched.dir and again._process is None
    assert again.wait(timeout=180) == "completed"
    assert again.metrics["step"].max() == 40
    monitor = Monitor(again)
    assert monitor.poll() is True  # the whole history read from the files
    assert monitor.rows_seen == len(again.metric_rows())
    bundle = monitor.static_bundle()  # what replaces the widget once the run ended
    assert "application/vnd.jupyter.widget-view+json" not in bundle
    assert "completed at step 40/40" in bundle["text/html"]


def test_a_run_that_cannot_start_fails_with_its_reason(shell, workdir):
    text = sft_quick(steps=5, ckpt=5).replace("primenb/tiny-byte", "no-such-org/no-such-model-xyz")
    text += '\n[renderer]\nname = "qwen3"\n'  # a hub model SFT needs a typed renderer for (upstream's rule)
    shell.run_cell(f"%%rltoml bad\n{text}")
    assert shell.run_cell("%prime_train bad --name broken --wait").success
    run = attach("broken")
    status = run.status
    assert status["state"] == "failed"
    assert "no-such-org/no-such-model-xyz" in status["error"]


def test_cli_train_prints_progress_and_exit_code(workdir):
    (workdir / "sft.toml").write_text(sft_quick(steps=4, ckpt=4))
    out = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "train", "sft.toml", "--name", "cli"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[cli] step 4/4" in out.stdout and "completed" in out.stdout


def test_run_directory_is_never_reused(workdir):
    config = load_config(sft_quick(steps=4, ckpt=4))
    prepare(config, name="once")
    with pytest.raises(PrimenbError, match="already holds a run"):
        prepare(config, name="once")


def test_keys_the_local_backend_cannot_use_are_listed(workdir):
    text = (
        sft_quick(steps=4, ckpt=4) + '\n[eval]\ninterval = 2\n\n[[eval.source]]\nname = "reverse-text"\n\n'
        '[eval.source.env.taskset]\nid = "reverse-text"\n\n[inference.vllm]\ngpu_memory_utilization = 0.5\n'
    )
    run_dir = prepare(load_config(text), name="unused")
    status = json.loads((run_dir / "status.json").read_text())
    assert "inference" in status["not_used_by_local_backend"]


def test_metric_series_memory_is_bounded_on_long_runs():
    series = MetricSeries(max_points=1000)
    for start in range(0, 100_000, 500):
        series.add([{"step": s, "loss": 1.0 / (s + 1), "reward": s / 100_000} for s in range(start, start + 500)])
    xs, ys = series.points["loss"]
    assert len(xs) <= 1000 and xs[-1] == 99_999 and ys[-1] == pytest.approx(1 / 100_000)
    assert xs == sorted(xs)


def test_a_killed_engine_ends_failed_with_the_reason(workdir):
    import os
    import signal

    config = load_config(sft_quick(steps=100000, ckpt=100000))
    from primenb.backends import submit

    run = submit(config, name="killed")
    wait_for(lambda: len(run.metric_rows()) >= 2, what=run.logs)
    os.killpg(run.launcher["pgid"], signal.SIGKILL)
    wait_for(lambda: run.status["state"] == "failed", what="the killed run to be failed")
    assert "killed by signal 9" in run.status["error"]
    assert attach("killed").status["state"] == "failed"  # written to disk for every later viewer


RL_QUICK = rl_toml(lora=True, primenb="sample_every = 2")


def test_grpo_lora_through_the_magic(shell, workdir):
    shell.run_cell(f"%%rltoml rl\n{RL_QUICK}")
    assert shell.run_cell("run = %prime_train rl --name grpo --wait").success
    run = shell.user_ns["run"]
    assert run.state == "completed", run.logs()
    assert "reward" in run.metrics.columns
    assert not run.samples.empty and {"prompt", "completion", "reward"} <= set(run.samples.columns)
    final = run.checkpoints[-1]
    assert (final / "adapter_config.json").exists()  # LoRA: the adapter only
    assert not (final / "model.safetensors").exists()


def test_two_ranks_really_run(workdir):
    config = load_config(rl_toml(lora=True, primenb="sample_every = 2", extra="[deployment]\nnum_train_gpus = 2\n"))
    from primenb.backends import submit

    run = submit(config, name="ddp")
    assert run.wait(timeout=300) == "completed", run.logs()
    assert run.status["world_size"] == 2
    assert "accelerate" in " ".join(run.launcher["command"])
