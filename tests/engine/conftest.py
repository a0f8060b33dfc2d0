"""Helpers for engine tests: write a resolved config into a run directory and run the engine."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Small, fast settings shared by the run tests (the tiny xs model learns these in seconds).
ENV = {"id": "reverse-text", "num_train": 2000, "num_eval": 100}


def sft_config(**top: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "max_steps": 80,
        "model": {"name": "primenb/tiny-byte", "lora": None},
        "data": {
            "type": "sft",
            "name": "reverse-text",
            "batch_size": 64,
            "micro_batch_size": 64,
            "seq_len": 64,
            "seed": 0,
            "shuffle": True,
            "loss_mask": {"system": False, "user": False, "assistant": True, "tool": False},
        },
        "optim": {"type": "adamw", "lr": 2e-3, "weight_decay": 0.0, "max_norm": 1.0, "betas1": 0.9, "betas2": 0.999},
        "scheduler": {"type": "linear", "warmup_steps": 5, "decay_steps": 0},
        "ckpt": {"interval": 40, "keep_last": None},
        "eval": {
            "interval": 40,
            "num_examples": 32,
            "source": [{"name": "reverse-text", "env": {"taskset": dict(ENV)}}],
        },
        "primenb": {"seed": 0, "sample_every": 20, "logging_steps": 5, "init_from": None},
        "output_dir": "outputs",
        "run": {"name": "test-sft"},
    }
    cfg.update(top)
    if isinstance(cfg.get("max_steps"), int) and isinstance(cfg.get("scheduler"), dict):
        # the schema's constant scheduler has no warm-up: linear without decay is constant after it
        cfg["scheduler"]["warmup_steps"] = min(5, cfg["max_steps"] - 1)
    return cfg


def rl_config(**top: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "max_steps": 6,
        "model": {"name": "primenb/tiny-byte"},
        "trainer": {
            "model": {"seq_len": 128, "lora": None},
            "optim": {
                "type": "adamw",
                "lr": 5e-4,
                "weight_decay": 0.0,
                "max_norm": 1.0,
                "betas1": 0.9,
                "betas2": 0.999,
            },
            "scheduler": {"type": "constant"},
        },
        "orchestrator": {
            "batch_size": 16,
            "group_size": 4,
            "seq_len": 128,
            "train": {
                "sampling": {"temperature": 1.0, "max_completion_tokens": 48},
                "source": [{"name": "reverse-text", "env": {"taskset": dict(ENV)}}],
            },
            "eval": None,
        },
        "primenb": {"seed": 0, "sample_every": 2, "logging_steps": 1, "init_from": None},
        "output_dir": "outputs",
        "run": {"name": "test-rl"},
    }
    cfg.update(top)
    return cfg


def engine_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONUNBUFFERED="1",
    )
    return env


def write_run(run_dir: Path, cfg: dict[str, Any]) -> Path:
    (run_dir / "configs").mkdir(parents=True, exist_ok=True)
    (run_dir / "configs" / "resolved.json").write_text(json.dumps(cfg, indent=1))
    return run_dir


def run_engine(
    run_dir: Path,
    argv: list[str] | None = None,
    timeout: float = 1200,  # only catches a hang: these runs take ~36 s alone, minutes on a busy machine
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = argv or [sys.executable, "-m", "primenb.engine", str(run_dir)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env or engine_env(), capture_output=True, text=True, timeout=timeout)
    (run_dir / "engine.stdout.txt").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    return proc


def start_engine(run_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "primenb.engine", str(run_dir)],
        cwd=ROOT,
        env=engine_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def status(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "status.json").read_text())


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def samples(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "samples.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="session")
def sft_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real SFT run on the default (80 steps), shared by the tests that need a checkpoint."""
    run_dir = write_run(tmp_path_factory.mktemp("sft") / "run", sft_config())
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def deep_update(cfg: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(cfg)
    node = out
    parts = path.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value
    return out
