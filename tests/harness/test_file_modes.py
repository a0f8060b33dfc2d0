"""Exports are shared: their files get the usual umask mode; only the private hashing key is 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import primenb.harness as h
from tests.harness.synth import write_runs


@pytest.fixture(autouse=True)
def usual_umask() -> Iterator[None]:
    """The modes asserted here are those of the usual umask, whatever the test process has."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_export_of_private_run_files_is_readable_by_whoever_receives_it(home: Path) -> None:
    [run_dir] = write_runs(home / "runs", 1)
    (run_dir / "metrics.jsonl").write_text('{"step": 1}\n')
    (run_dir / "configs").mkdir()
    (run_dir / "configs" / "config.toml").write_text("max_steps = 1\n")
    for f in (run_dir / "trace.json", run_dir / "metrics.jsonl", run_dir / "configs" / "config.toml"):
        f.chmod(0o600)  # as an older primenb (or a strict umask) left them
    dest = h.export("t00000000", home / "bundle")
    files = [p for p in dest.rglob("*") if p.is_file()]
    assert {p.relative_to(dest).as_posix() for p in files} >= {"trace.json", "metrics.jsonl", "configs/config.toml"}
    assert {p.relative_to(dest).as_posix(): _mode(p) for p in files} == {
        p.relative_to(dest).as_posix(): 0o644 for p in files
    }
    h.rm("t00000000", files=True)  # as on the machine that receives it
    back = h.import_(dest, home / "imported")
    assert _mode(back.run_dir / "metrics.jsonl") == 0o644


def test_the_private_hashing_key_is_the_one_0600_file(home: Path) -> None:
    from primenb.protocol import hashing

    hashing._KEY = None  # made on first use in this PRIME_HOME
    try:
        hashing.private_digest("a prompt")
        assert _mode(home / "home" / "harness" / hashing.KEY_FILE) == 0o600
    finally:
        hashing._KEY = None
