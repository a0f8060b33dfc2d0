"""Synthetic traces (no training): run directories with a trace.json, for index tests."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from primenb.protocol.record import write_trace


def make_doc(i: int, *, prefix: str = "t", status: str = "completed") -> dict[str, Any]:
    return {
        "trace_id": f"{prefix}{i:08d}",
        "trace_version": 1,
        "parent": f"{prefix}{i - 1:08d}" if i % 3 else None,
        "name": f"{prefix}-run-{i}",
        "backend": "local",
        "host": "box",
        "mode": "rl" if i % 2 else "sft",
        "status": status,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "created": 1_700_000_000 + i,
        "duration_s": 10.0 + i,
        "steps": {"start": 0, "last": 10, "max": 10},
        "model": {"id": "primenb/tiny-byte", "fingerprint": "abc"},
        "adapter": {"type": "lora", "rank": 4 + i % 2} if i % 5 == 0 else None,
        "config": {
            "orchestrator": {
                "batch_size": 16,
                "group_size": 4,
                "train": {"source": [{"env": {"taskset": {"id": "reverse-text"}}}]},
            },
            "trainer": {"optim": {"lr": 1e-4 * (1 + i % 3)}},
            "primenb": {"seed": i % 4},
        },
        "data": {"train": {"hash": f"h{i % 7}", "sources": [{"name": "reverse-text", "env_id": "reverse-text"}]}},
        "metrics": {
            "final_reward": (i % 10) / 10,
            "best_eval": {"key": "eval/x/reward", "value": (i % 7) / 7, "step": 10},
        },
    }


def write_runs(root: Path, n: int, *, prefix: str = "t", index: bool = True) -> list[Path]:
    from primenb.protocol.index import index_trace

    out = []
    for i in range(n):
        run_dir = root / f"{prefix}-run-{i}"
        run_dir.mkdir(parents=True, exist_ok=True)
        doc = make_doc(i, prefix=prefix)
        write_trace(run_dir, doc)
        if index:
            assert index_trace(doc, run_dir)
        out.append(run_dir)
    return out


if __name__ == "__main__":  # python -m tests.harness.synth ROOT N PREFIX: one concurrent writer
    write_runs(Path(sys.argv[1]), int(sys.argv[2]), prefix=sys.argv[3])
