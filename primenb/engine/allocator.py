"""glibc malloc settings for the engine process, applied before torch allocates anything.

A CPU training step frees and allocates the same few hundred MB of activations and gradients
again. With glibc's defaults, a block over the mmap threshold (dynamic, at most 32 MB) is mapped
and unmapped on every step, and a free heap top over twice that threshold goes back to the OS,
so each step page-faults its memory in again. On the tiny SFT bench that was about 4 million
minor faults per run and a sixth of the wall time (bench/bench_engine.py). Keeping blocks of up to
512 MB in the heap, and trimming only a free top over 1 GB, removes most of those faults (4.5
million to 0.23 million, 8.7 to 10.1 steps/s). The cost is memory freed but not handed back:
peak RSS +190 MB (GRPO) and +320 MB (SFT) on the bench, so a machine or container with under
8 GiB (Binder gives 2 GB) keeps glibc's defaults.

No numbers change: where memory lives does not change the arithmetic. A user's own
``MALLOC_*_`` / ``GLIBC_TUNABLES`` malloc settings win, and ``PRIMENB_MALLOC_TUNING=0`` turns
this off.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator
from pathlib import Path

OPT_OUT = "PRIMENB_MALLOC_TUNING"
MMAP_THRESHOLD = 512 << 20
TRIM_THRESHOLD = 1 << 30
MIN_MEMORY = 8 << 30  # below this memory limit, the defaults
_M_TRIM_THRESHOLD = -1  # mallopt() parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_USER_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")
_CGROUP = Path("/sys/fs/cgroup")


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # not Linux, or a libc that does not answer
        return False


def _cgroup_limit_files() -> Iterator[Path]:
    """Where this process's cgroup memory limit may be written (v2 and v1, own group and root)."""
    yield _CGROUP / "memory.max"
    yield _CGROUP / "memory" / "memory.limit_in_bytes"
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return
    for line in lines:
        _, controllers, group = (line.split(":", 2) + ["", ""])[:3]
        group = group.strip().lstrip("/")
        if not group or ".." in group.split("/"):
            continue
        if controllers == "":
            yield _CGROUP / group / "memory.max"
        elif "memory" in controllers.split(","):
            yield _CGROUP / "memory" / group / "memory.limit_in_bytes"


def memory_limit() -> int | None:
    """Bytes this process may use: the least of physical memory and its cgroup limits."""
    limits = []
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no sysconf, or no such name
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    for path in _cgroup_limit_files():
        try:
            text = path.read_text()[:32].strip()  # "max" or a byte count
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits) if limits else None


def skip_reason() -> str | None:
    """Why the settings are not applied in this process, or None when they are to be."""
    if os.environ.get(OPT_OUT, "1").strip() == "0":
        return f"{OPT_OUT}=0"
    if any(name in os.environ for name in _USER_VARIABLES) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "the environment sets its own malloc settings"
    if not _is_glibc():
        return "not glibc"
    limit = memory_limit()
    if limit is None or limit < MIN_MEMORY:
        known = "unknown" if limit is None else f"{limit / (1 << 30):.1f} GiB"
        return f"memory limit {known}, under {MIN_MEMORY >> 30} GiB"
    return None


def tune_malloc() -> dict[str, int] | str:
    """Apply the settings: the values set, or the reason they were not."""
    reason = skip_reason()
    if reason is not None:
        return reason
    try:
        libc = ctypes.CDLL(None)  # this process's own C library
        ok = (
            libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
            and libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        )
    except (OSError, AttributeError):
        return "mallopt is not available"
    if not ok:
        return "mallopt refused the settings"
    return {"mmap_threshold": MMAP_THRESHOLD, "trim_threshold": TRIM_THRESHOLD}


__all__ = ["MIN_MEMORY", "MMAP_THRESHOLD", "OPT_OUT", "TRIM_THRESHOLD", "memory_limit", "skip_reason", "tune_malloc"]
