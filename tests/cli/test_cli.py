"""`primenb validate` and `primenb init` in a terminal."""

from __future__ import annotations

import json
import subprocess
import sys

from ..config.test_broken import VALID
from ..conftest import UPSTREAM


def _run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "primenb.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd
    )


def test_validate_upstream_examples_exit_zero():
    out = _run("validate", *UPSTREAM)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count(": ok") == len(UPSTREAM)


def test_validate_reports_every_problem_and_exits_one(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(VALID.replace("batch_size = 32", "batch_sise = 32").replace("lr = 1e-5", 'lr = "x"'))
    out = _run("validate", bad)
    assert out.returncode == 1
    assert f"{bad}:8:1: error: orchestrator.batch_sise" in out.stdout
    assert "did you mean `batch_size`?" in out.stdout
    assert "trainer.optim.lr" in out.stdout
    assert "Traceback" not in out.stderr


def test_validate_json(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(VALID.replace("group_size = 8", "group_size = 7"))
    data = json.loads(_run("validate", "--json", bad).stdout)
    assert data["ok"] is False
    [d] = data["diagnostics"]
    assert (d["path"], d["line"], d["severity"]) == ("orchestrator.batch_size", 8, "error")


def test_validate_missing_file_is_a_clear_error(tmp_path):
    out = _run("validate", tmp_path / "nope.toml")
    assert out.returncode == 2 and "config file not found" in out.stderr


def test_init_writes_valid_configs_and_refuses_to_overwrite(tmp_path):
    assert _run("init", cwd=tmp_path).returncode == 0
    assert _run("init", "--sft", cwd=tmp_path).returncode == 0
    assert _run("validate", tmp_path / "rl.toml", tmp_path / "sft.toml").returncode == 0
    again = _run("init", cwd=tmp_path)
    assert again.returncode == 2 and "already exists" in again.stderr
