"""How fast the embedded default learns: SFT warm start, then GRPO, through the real engine.

    python bench/learning_curve.py                      # xs model, defaults below
    python bench/learning_curve.py --size s --sft-steps 300 --grpo-steps 300

Each phase is a real ``python -m primenb.engine RUN_DIR`` run (the same code path as a notebook
launch). Held-out greedy evaluation (reward = SequenceMatcher ratio of the tagged answer, and
exact match) is logged by the engine before and after each phase; this script prints them with
the wall time of each phase. Run directories go to bench/results/learning_curve/ (git-ignored).
Not a test: timings vary by 15-35 % between runs on a shared 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def env_source(args: argparse.Namespace) -> list[dict[str, Any]]:
    taskset = {"id": "reverse-text", "num_train": args.num_train, "num_eval": args.num_eval, "seed": 0}
    return [{"name": "reverse-text", "env": {"taskset": taskset}}]


def sft_config(args: argparse.Namespace, model: str) -> dict[str, Any]:
    return {
        "max_steps": args.sft_steps,
        "model": {"name": model, "lora": None},
        "data": {
            "type": "sft",
            "name": "reverse-text",
            "batch_size": 64,
            "micro_batch_size": 64,
            "seq_len": 64,
            "seed": 0,
            "shuffle": True,
            "loss_mask": {"system": False, "user": False, "assistant": True, "tool": False},
        },
        "optim": {
            "type": "adamw",
            "lr": args.sft_lr,
            "weight_decay": 0.0,
            "max_norm": 1.0,
            "betas1": 0.9,
            "betas2": 0.999,
        },
        "scheduler": {"type": "constant", "warmup_steps": 50},
        "ckpt": None,
        "eval": {"interval": args.eval_every, "num_examples": args.num_eval, "source": env_source(args)},
        "primenb": {"seed": args.seed, "sample_every": 100, "logging_steps": 10},
        "run": {"name": "bench-sft"},
    }


def grpo_config(args: argparse.Namespace, model: str, init_from: str) -> dict[str, Any]:
    return {
        "max_steps": args.grpo_steps,
        "model": {"name": model},
        "trainer": {
            "model": {"seq_len": 128, "lora": None},
            "optim": {
                "type": "adamw",
                "lr": args.grpo_lr,
                "weight_decay": 0.0,
                "max_norm": 1.0,
                "betas1": 0.9,
                "betas2": 0.999,
            },
            "scheduler": {"type": "constant"},
            "ckpt": None,
        },
        "orchestrator": {
            "batch_size": args.batch_size,
            "group_size": args.group_size,
            "seq_len": 128,
            "train": {"sampling": {"temperature": 1.0, "max_completion_tokens": 48}, "source": env_source(args)},
            "eval": {"interval": args.eval_every, "num_examples": args.num_eval, "source": env_source(args)},
        },
        "primenb": {"seed": args.seed, "sample_every": 50, "logging_steps": 5, "init_from": init_from},
        "run": {"name": "bench-grpo"},
    }


def run_phase(run_dir: Path, cfg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "resolved.json").write_text(json.dumps(cfg, indent=1))
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-m", "primenb.engine", str(run_dir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.time() - t0
    status = json.loads((run_dir / "status.json").read_text())
    if proc.returncode != 0 or status.get("state") != "completed":
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"{run_dir.name}: {status.get('state')}: {status.get('error')}")
    return wall, status


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def train_seconds(rows: list[dict[str, Any]]) -> float:
    times = [r["time"] for r in rows if "loss" in r or "reward" in r]
    return (max(times) - min(times)) if len(times) > 1 else 0.0


def summarize(name: str, run_dir: Path, wall: float) -> dict[str, Any]:
    rows = read_metrics(run_dir)
    evals = [r for r in rows if "eval/reverse-text/reward" in r]
    steps = max(r["step"] for r in rows)
    train_s = train_seconds(rows)
    print(
        f"\n== {name}: {steps} steps, process wall {wall:.1f} s, training {train_s:.1f} s "
        f"({steps / train_s if train_s else float('nan'):.2f} steps/s)"
    )
    print("   step   eval reward   exact match   t(s) since first step")
    t_start = min(r["time"] for r in rows)
    for r in evals:
        print(
            f"   {r['step']:>4}   {r['eval/reverse-text/reward']:.3f}         "
            f"{r.get('eval/reverse-text/exact_match', float('nan')):.3f}         "
            f"{r['time'] - t_start:6.1f}"
        )
    sampled = [r["reward"] for r in rows if "reward" in r]
    if sampled:
        k = max(1, len(sampled) // 5)
        first, last = sum(sampled[:k]) / k, sum(sampled[-k:]) / k
        print(f"   sampled train reward (T=1): first fifth {first:.3f} -> last fifth {last:.3f}")
    losses = [r["loss"] for r in rows if "loss" in r and "reward" not in r]
    if losses:
        print(f"   loss: first {losses[0]:.3f} -> last {losses[-1]:.3f}")
    return {"first": evals[0], "last": evals[-1], "wall": wall, "train_s": train_s, "steps": steps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", default="xs", choices=["xs", "s", "m"])
    p.add_argument("--sft-steps", type=int, default=150)  # partial: leaves room for GRPO
    p.add_argument("--grpo-steps", type=int, default=400)
    p.add_argument("--sft-lr", type=float, default=2e-3)
    p.add_argument("--grpo-lr", type=float, default=1e-4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--num-train", type=int, default=20000)
    p.add_argument("--num-eval", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "learning_curve")
    args = p.parse_args()
    model = f"primenb/tiny-byte-{args.size}"

    sft_dir, grpo_dir = args.out / "sft", args.out / "grpo"
    print(
        f"model {model}; SFT {args.sft_steps} steps (batch 64, lr {args.sft_lr}), then GRPO "
        f"{args.grpo_steps} steps ({args.batch_size} rollouts = {args.batch_size // args.group_size}"
        f" prompts x {args.group_size}, lr {args.grpo_lr}); eval: {args.num_eval} held-out "
        f"strings, greedy"
    )
    wall, status = run_phase(sft_dir, sft_config(args, model))
    sft = summarize("SFT warm start", sft_dir, wall)
    wall, status = run_phase(grpo_dir, grpo_config(args, model, status["final_checkpoint"]))
    grpo = summarize("GRPO", grpo_dir, wall)

    key_r, key_e = "eval/reverse-text/reward", "eval/reverse-text/exact_match"
    print("\n== before -> after (held-out greedy)")
    print(f"   random init      reward {sft['first'][key_r]:.3f}  exact {sft['first'][key_e]:.3f}")
    print(
        f"   after SFT        reward {sft['last'][key_r]:.3f}  exact {sft['last'][key_e]:.3f}"
        f"   (+{sft['wall']:.0f} s process, {sft['train_s']:.0f} s training)"
    )
    print(
        f"   after GRPO       reward {grpo['last'][key_r]:.3f}  exact {grpo['last'][key_e]:.3f}"
        f"   (+{grpo['wall']:.0f} s process, {grpo['train_s']:.0f} s training)"
    )


if __name__ == "__main__":
    main()
