"""The engine's glibc malloc settings: a freed large block is reused, not faulted in again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from primenb.engine import allocator

# In a fresh process: allocate, touch and free a 64 MB block eight times (as a training step does
# with its activations), and print the minor page faults that took.
# (The machine's memory is taken as just enough: this tests what the settings do, anywhere.)
_CHURN = """
import json, resource
from primenb.engine import allocator
allocator.memory_limit = lambda: allocator.MIN_MEMORY
tuned = allocator.tune_malloc()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):
    block = bytearray(64 << 20)  # malloc + memset: every page touched
    del block
print(json.dumps([tuned, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before]))
"""


def _faults(**env: str) -> tuple[dict[str, int] | str, int]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PRIMENB_MALLOC_TUNING", "GLIBC_TUNABLES")}
    clean = {k: v for k, v in clean.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", _CHURN], env={**clean, **env}, capture_output=True, text=True, timeout=120, check=True
    )
    tuned, faults = json.loads(done.stdout)
    return tuned, faults


def test_a_freed_block_is_reused_instead_of_faulted_in_again() -> None:
    (settings, tuned), (reason, default) = _faults(), _faults(PRIMENB_MALLOC_TUNING="0")
    assert settings == {"mmap_threshold": 512 << 20, "trim_threshold": 1 << 30}
    assert reason == "PRIMENB_MALLOC_TUNING=0"
    # default: glibc maps and unmaps a 64 MB block on every round, so all 8 rounds fault it in;
    # tuned: the first round faults it in and the other 7 reuse the heap (counted in pages or in
    # huge pages alike, hence a ratio)
    assert default >= 3 * tuned, (tuned, default)


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"PRIMENB_MALLOC_TUNING": "0"}, "PRIMENB_MALLOC_TUNING=0"),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, "the environment sets its own malloc settings"),
        ({"MALLOC_MMAP_THRESHOLD_": "65536"}, "the environment sets its own malloc settings"),
        ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}, "the environment sets its own malloc settings"),
    ],
)
def test_the_users_own_settings_win(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], reason: str) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert allocator.skip_reason() == reason
    assert allocator.tune_malloc() == reason


def test_unrelated_tunables_do_not_turn_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(allocator, "memory_limit", lambda: allocator.MIN_MEMORY)
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0")
    monkeypatch.delenv("PRIMENB_MALLOC_TUNING", raising=False)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"):
        monkeypatch.delenv(name, raising=False)
    assert allocator.skip_reason() is None


@pytest.mark.parametrize(("limit", "shown"), [(2 << 30, "2.0 GiB"), (None, "unknown")])
def test_a_small_machine_keeps_glibc_defaults(monkeypatch: pytest.MonkeyPatch, limit: int | None, shown: str) -> None:
    # freed memory kept in the heap costs a few hundred MB: too much for Binder's 2 GB
    monkeypatch.setattr(allocator, "memory_limit", lambda: limit)
    for name in (
        "PRIMENB_MALLOC_TUNING",
        "GLIBC_TUNABLES",
        "MALLOC_TRIM_THRESHOLD_",
        "MALLOC_MMAP_THRESHOLD_",
        "MALLOC_TOP_PAD_",
    ):
        monkeypatch.delenv(name, raising=False)
    assert allocator.tune_malloc() == f"memory limit {shown}, under 8 GiB"


def test_the_memory_limit_is_at_most_physical_memory() -> None:
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    limit = allocator.memory_limit()
    assert limit is not None and 0 < limit <= physical
