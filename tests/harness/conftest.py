"""Shared set-up for harness tests: an isolated PRIME_HOME and working directory per module."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET_TOKEN = "hf_SeCrEtToKeNvAlUe0123456789abcdefXYZ"
SECRET_KEY = "sk-live-SECRETKEYVALUE-0123456789abcdef"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A git work tree (one tracked file, modified: dirty) as the cwd, its own PRIME_HOME, and
    secrets in the environment that must never reach a run directory."""
    root = tmp_path_factory.mktemp("harness")
    git = ["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (root / "notes.txt").write_text("v1\n")
    subprocess.run([*git, "add", "notes.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "init"], check=True)
    (root / "notes.txt").write_text("v2\n")  # tracked and modified: dirty
    (root / ".gitignore").write_text("outputs/\nhome/\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        mp.setenv("PRIME_HOME", str(root / "home"))
        mp.setenv("HF_TOKEN", SECRET_TOKEN)
        mp.setenv("MY_SERVICE_API_KEY", SECRET_KEY)
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TOKENIZERS_PARALLELISM", "false")
        mp.setenv("OMP_NUM_THREADS", "1")  # several tiny runs share 2 cores
        yield root
