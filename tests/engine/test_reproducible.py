"""A CPU run is bit-identical whatever else the machine is doing: the same short config trained
twice, once beside CPU-burning processes, gives exactly the same metrics (wall-time metrics
aside) and the same weights. The second run also keeps glibc's default malloc settings
(primenb/engine/allocator.py), which must not change a number either. The SFT sample sets,
whose timing follows the wall clock, are drawn on every step here so that a difference in when
they run would show."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.engine.conftest import deep_update, engine_env, metrics, run_engine, sft_config, status, write_run

pytestmark = pytest.mark.slow


def _timing(key: str) -> bool:
    """Metrics that measure the wall clock, not the training."""
    return key == "time" or key.endswith(("/s", "time_s", "_runtime", "per_second"))


def _numbers(run_dir: Path) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if not _timing(k)} for row in metrics(run_dir)]


def _config() -> dict[str, Any]:
    cfg = sft_config(max_steps=4, ckpt={"interval": 4, "keep_last": None})
    cfg = deep_update(cfg, "primenb", {"seed": 3, "sample_every": 1, "logging_steps": 1, "init_from": None})
    cfg = deep_update(cfg, "data.batch_size", 16)
    cfg = deep_update(cfg, "data.micro_batch_size", 8)  # two micro batches: accumulation in the sums
    cfg = deep_update(cfg, "eval.interval", 4)
    cfg = deep_update(cfg, "eval.sampling", {"max_completion_tokens": 16})  # short greedy sets: a cheap test
    return deep_update(cfg, "eval.num_examples", 2)


def _burners(n: int) -> list[subprocess.Popen[bytes]]:
    code = "import time\nend = time.time() + 600\nwhile time.time() < end: pass\n"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def test_cpu_run_is_identical_beside_a_busy_process(tmp_path: Path) -> None:
    quiet = write_run(tmp_path / "quiet", _config())
    assert run_engine(quiet, timeout=600).returncode == 0, (quiet / "engine.stdout.txt").read_text()[-3000:]
    burners = _burners(os.cpu_count() or 2)
    try:
        busy = write_run(tmp_path / "busy", _config())
        default_malloc = {**engine_env(), "PRIMENB_MALLOC_TUNING": "0"}
        assert run_engine(busy, timeout=600, env=default_malloc).returncode == 0, (
            busy / "engine.stdout.txt"
        ).read_text()[-3000:]
    finally:
        for p in burners:
            p.kill()
            p.wait()
    assert status(quiet)["state"] == status(busy)["state"] == "completed"
    assert "malloc: blocks up to 512 MB stay in the heap" in (quiet / "logs" / "engine.log").read_text()
    assert "malloc: glibc defaults (PRIMENB_MALLOC_TUNING=0)" in (busy / "logs" / "engine.log").read_text()
    assert _numbers(quiet) == _numbers(busy)
    weights = [(d / "checkpoints" / "step_4" / "model.safetensors").read_bytes() for d in (quiet, busy)]
    assert weights[0] == weights[1]
