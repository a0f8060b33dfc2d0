"""Adversarial tests: each one reproduces a defect of issue 9 and checks the clear error AND that
nothing was lost or written outside its place. Every test gets its own PRIME_HOME and cwd."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``tmp_path/work`` as the cwd, ``tmp_path/home`` as PRIME_HOME; ``tmp_path`` itself is the
    'outside' that nothing may be written to."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    yield work


def tree(root: Path) -> set[str]:
    """Every path under ``root`` (relative), to compare before and after."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in (*dirnames, *filenames):
            out.add(str((Path(dirpath) / n).relative_to(root)))
    return out


def rl_text(**top: object) -> str:
    """The RL starter config with top-level keys replaced (``max_steps=5``)."""
    from primenb.config.templates import starter

    text = starter()
    for key, value in top.items():
        lines = [ln for ln in text.splitlines() if not ln.startswith(f"{key} =")]
        text = f"{key} = {value}\n" + "\n".join(lines) + "\n"
    return text
