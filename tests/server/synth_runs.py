"""Synthetic run directories for the sidebar tests (no training): an RL run with an SFT warm-up,
whose metrics rows look like the engine's (warm-up steps 0..N under ``warmup/``, then GRPO steps
restarting at 0, an eval row and a train row sharing a step), and many runs at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.harness.synth import make_doc

WARMUP_STEPS = 200
RL_STEPS = 6
EVAL_EVERY = 3


def warmup_rows(*, rl_steps: int = RL_STEPS, reward_errors: bool = False) -> list[dict[str, Any]]:
    """The metrics.jsonl rows of an RL run with a 200-step SFT warm-up, in the engine's order:
    the warm-up's eval at step 0, its loss rows, GRPO's eval at step 0, then per step an eval row
    (every 3 steps) before the train row of the same step."""
    rows: list[dict[str, Any]] = [{"step": 0, "phase": "sft warmup", "warmup/eval/reward": 0.0}]
    rows += [{"step": s, "phase": "sft warmup", "warmup/loss": 3.0 - s / 100} for s in range(1, WARMUP_STEPS + 1)]
    rows.append({"step": 0, "phase": "rl", "eval/reward": 0.5})
    for s in range(1, rl_steps + 1):
        if s % EVAL_EVERY == 0:
            rows.append({"step": s, "phase": "rl", "eval/reward": 0.5 + s / 20})
        row: dict[str, Any] = {"step": s, "phase": "rl", "reward": s / 10, "loss": 0.1 / s}
        if reward_errors:
            row.update({"reward_calls": 8, "reward_errors": 8, "reward_errors/exact_match": 8})
        rows.append(row)
    return rows


def write_run(
    runs: Path,
    i: int,
    *,
    prefix: str,
    name: str | None = None,
    status: str = "completed",
    mode: str = "rl",
    rows: list[dict[str, Any]] | None = None,
    index: Any = None,
    step: int | None = None,
    created: int | None = None,
    trace_id: str | None = None,
) -> tuple[str, Path]:
    """One run directory with trace.json, status.json and metrics.jsonl, indexed. Returns (trace id, dir)."""
    from primenb.protocol.record import write_trace

    doc = make_doc(i, prefix=prefix, status=status)
    doc["parent"] = None
    doc["mode"] = mode
    doc["name"] = name or f"{prefix}-run-{i}"
    doc["privacy"] = {"data_collection": "allow"}
    if created is not None:
        doc["created"] = created
    if trace_id is not None:
        doc["trace_id"] = trace_id
    if mode == "sft":
        doc["metrics"] = {"final_loss": 0.25 + (i % 4) / 100}
        doc["config"] = {"data": {"batch_size": 8}, "optim": {"lr": 1e-3}, "max_steps": 10}
    run_dir = runs / doc["name"]
    run_dir.mkdir(parents=True, exist_ok=True)
    write_trace(run_dir, doc)
    last = step if step is not None else (rows[-1]["step"] if rows else 10)
    (run_dir / "status.json").write_text(
        json.dumps({"state": status, "step": last, "max_steps": 10, "backend": "local"})
    )
    if rows is not None:
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if index is None:
        from primenb.protocol.index import index_trace

        assert index_trace(doc, run_dir)
    else:
        index.upsert(doc, run_dir)
    return doc["trace_id"], run_dir


def bulk_runs(runs: Path, n: int, *, prefix: str = "bulk") -> dict[str, int]:
    """``n`` finished runs straight into the harness index in one transaction (a few seconds for
    10,000): every third failed or stopped, every other one SFT with a stored final loss. Only the
    index rows exist (what the list reads); returns the count per status."""
    from primenb.protocol.index import Index, index_row

    index = Index()
    runs.mkdir(parents=True, exist_ok=True)
    index.add_root(runs)
    counts: dict[str, int] = {}
    rows = []
    for i in range(n):
        status = ("completed", "failed", "stopped")[i % 3]
        counts[status] = counts.get(status, 0) + 1
        doc = make_doc(i, prefix=prefix, status=status)
        doc["parent"] = None
        if doc["mode"] == "sft":
            doc["metrics"] = {"final_loss": 0.2 + (i % 50) / 1000}
        rows.append(index_row(doc, runs / f"{prefix}-run-{i}"))
    index.upsert_many(rows)
    return counts
