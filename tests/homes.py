"""The ``home`` fixture most tests share, declared once: a fresh PRIME_HOME (``tmp_path/home``) and
``tmp_path`` as the cwd, returned.

`tests/conftest.py` offers it everywhere. A folder whose conftest shapes its own ``home`` (the
adversarial tests' ``work/`` cwd) lets a module take this one back by importing it."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(name="home")  # a test asks for `home`; `plain_home` is what a module imports
def plain_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path/home`` as PRIME_HOME, ``tmp_path`` as the cwd (returned)."""
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path
