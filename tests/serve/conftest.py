"""Trained traces for the serving tests: the embedded default (a full checkpoint) and two LoRA
adapters of one base trained differently, each a few SFT steps, once per test session; and a
server over them, stopped at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..tiny import sft_toml

EVAL = """
[eval]
interval = 1000
num_examples = 12

[eval.sampling]
max_completion_tokens = 24

[[eval.source]]
name = "reverse-text"

[eval.source.env.taskset]
id = "reverse-text"
num_eval = 50
"""
LORA = "\n[model.lora]\nrank = 4\nalpha = 8\n"


def _train(name: str, toml: str) -> Any:
    from primenb import load_config
    from primenb.backends import submit

    run = submit(load_config(toml), name=name)
    return run


@pytest.fixture(scope="session")
def serve_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A PRIME_HOME and working folder of their own for the whole serving session."""
    root = tmp_path_factory.mktemp("serve")
    old_home, old_cwd = os.environ.get("PRIME_HOME"), os.getcwd()
    os.environ["PRIME_HOME"] = str(root / "home")
    os.chdir(root)
    try:
        yield root
    finally:
        from primenb.serve import client

        client.stop("all") if client.servers() else None
        os.chdir(old_cwd)
        if old_home is None:
            os.environ.pop("PRIME_HOME", None)
        else:
            os.environ["PRIME_HOME"] = old_home


@pytest.fixture(scope="session")
def traces(serve_home: Path) -> dict[str, Any]:
    """``full``: the embedded default, fully fine-tuned, with a final eval; ``ada``/``adb``: LoRA
    adapters of the same base, trained differently (they answer differently)."""
    runs = {
        "full": _train("full", sft_toml(steps=4, lr=3e-3, extra=EVAL)),
        "ada": _train("ada", sft_toml(steps=4, lr=3e-2, extra=LORA)),
        "adb": _train("adb", sft_toml(steps=1, lr=1e-4, primenb="seed = 2", extra=LORA)),
    }
    for name, run in runs.items():
        assert run.wait(timeout=600) == "completed", (name, run.logs())
    return runs


@pytest.fixture(scope="session")
def server(traces: dict[str, Any]) -> Iterator[Any]:
    from primenb.serve import client

    s = client.start(["full", "ada", "adb"])
    yield s
    s.stop()
