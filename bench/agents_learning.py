"""How the embedded default learns an agentic task through verifiers' own episodes (issue 41).

    python bench/agents_learning.py                           # reverse-turns, defaults below
    python bench/agents_learning.py --warmup 300 --steps 40 --eval-tasks 50
    python bench/agents_learning.py --taskset lookup-code --warmup 150 --steps 10

One real run of a built-in taskset (harness ``null``, runtime ``subprocess``): ``reverse-turns``
(two user turns, feedback between them, its own verifiers ``Env``) or ``lookup-code`` (the answer
is only known through its ``lookup`` tool): an SFT warm-up on the tasks' ideal conversations, then
GRPO on episodes. Afterwards the base model, the warm-up model and the final one are served
(``primenb serve``) and played on ``--eval-tasks`` held-out tasks (``split = "eval"``: words never
trained on) through verifiers' loop with its training client, greedy. Prints the held-out reward
(reverse-turns: mean per-turn similarity; lookup-code: 0.2 for the right lookup + 0.8 for
answering its result exactly; 1.0 is perfect), the share of exact answers and each phase's wall
time. Runs go to bench/results/agents_learning/ (git-ignored). Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

AGENT = """
[orchestrator.train.source.env.agent]
max_turns = {max_turns}

[orchestrator.train.source.env.agent.harness]
id = "null"

[orchestrator.train.source.env.agent.runtime]
type = "subprocess"
"""


# per taskset: model turns, tokens per reply, sequence length, the metric that counts exact answers
# (and how many answers an episode has)
TASKSETS: dict[str, dict[str, Any]] = {
    "reverse-turns": {"max_turns": 4, "max_tokens": 12, "seq_len": 256, "exact": "exact_turns", "per_turn": True},
    "lookup-code": {"max_turns": 3, "max_tokens": 96, "seq_len": 1024, "exact": "answered", "per_turn": False},
}


def config(args: argparse.Namespace) -> str:
    from tiny import rl_toml

    task = TASKSETS[args.taskset]
    toml = rl_toml(
        steps=args.steps,
        env=args.taskset,
        env_args=f"num_tasks = {args.num_tasks}\n",
        seq_len=task["seq_len"],
        max_tokens=task["max_tokens"],
        batch_size=args.batch_size,
        group_size=args.group_size,
        lr=args.lr,
        model="primenb/tiny-byte",
        primenb=f"seed = {args.seed}\nsample_every = 10\nsft_warmup_steps = {args.warmup}\n",
    )
    return toml.replace("[trainer.optim]", AGENT.format(max_turns=task["max_turns"]) + "\n[trainer.optim]")


def held_out(server: Any, model: str, tokenizer: str, n: int, taskset: str) -> dict[str, float]:
    from primenb.envs import vf_episodes

    task = TASKSETS[taskset]
    t0 = time.perf_counter()
    episodes = vf_episodes.run_episodes(
        taskset,
        args={"split": "eval", "num_tasks": n},
        base_url=server.url,
        model=model,
        num_tasks=n,
        tokenizer=tokenizer,
        sampling={"temperature": 0.0, "max_tokens": task["max_tokens"]},
        max_turns=task["max_turns"],
        max_concurrent=16,
    )
    rewards = [e.reward for e in episodes]
    exact = [(r.metrics.get(task["exact"]) or r.rewards.get(task["exact"]) or 0.0) for e in episodes for r in e.runs]
    answers = sum(len(e.turns) for e in episodes) if task["per_turn"] else len(episodes)
    tool_calls = [r.metrics.get("tool_calls") or 0.0 for e in episodes for r in e.runs]
    return {
        "reward": sum(rewards) / len(rewards),
        "exact": sum(exact) / max(1, answers),
        "tool_calls_per_episode": sum(tool_calls) / len(episodes),
        "failed": float(sum(1 for e in episodes if not e.ok)),
        "seconds": time.perf_counter() - t0,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--taskset", choices=sorted(TASKSETS), default="reverse-turns")
    p.add_argument("--warmup", type=int, default=300, help="SFT warm-up steps on ideal conversations")
    p.add_argument("--steps", type=int, default=20, help="GRPO steps on episodes")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--num-tasks", type=int, default=2000)
    p.add_argument("--eval-tasks", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    out = ROOT / "bench" / "results" / "agents_learning"
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PRIME_HOME", str(out / "prime-home"))
    os.chdir(out)
    from primenb import load_config
    from primenb.backends import submit
    from primenb.engine.models import build_byte_tokenizer
    from primenb.serve import client

    t0 = time.perf_counter()
    run = submit(load_config(config(args)), name=f"agents-{args.taskset}-{int(time.time())}")
    state = run.wait(timeout=6 * 3600)
    wall = time.perf_counter() - t0
    if state != "completed":
        sys.exit(f"run {state}:\n{run.logs()[-3000:]}")
    rows = run.metric_rows()
    warm = [r for r in rows if "warmup/loss" in r]
    grpo = [r for r in rows if "reward" in r]
    tok = tempfile.mkdtemp(prefix="tiny-tok-")
    build_byte_tokenizer().save_pretrained(tok)
    results = {}
    # the base model (its random-init weights: what the warm-up starts from), then the run's
    for server in (client.start(base="primenb/tiny-byte"), client.start([run.status["trace_id"]], parents=True)):
        try:
            results.update({m: held_out(server, m, tok, args.eval_tasks, args.taskset) for m in server.models})
        finally:
            server.stop(30.0)
    first = sum(r["reward"] for r in grpo[:3]) / max(1, len(grpo[:3]))
    last = sum(r["reward"] for r in grpo[-3:]) / max(1, len(grpo[-3:]))
    report = {
        "args": vars(args),
        "wall_s": wall,
        "warmup_last_loss": warm[-1]["warmup/loss"] if warm else None,
        "grpo_train_reward_first3": first,
        "grpo_train_reward_last3": last,
        "grpo_step_time_s": [r.get("step_time") for r in grpo],
        "held_out": results,
    }
    print(json.dumps(report, indent=2))
    (out / f"{run.name}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
