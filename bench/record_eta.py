"""Record how a real run's status.json moves, for the ETA's cost model and its replay bench.

    python bench/record_eta.py --name tokens100 --warmup 20 --steps 12 --max-tokens 100

Launches a tiny RL run with an SFT warm-up through the local backend (the notebook's code path),
reads status.json every 0.2 s until the run ends, and appends the recording (the snapshots that
changed, timed from the launch) to bench/results/eta_recordings.json (git-ignored). It prints the
measured cost of a GRPO step in warm-up steps, next to what `primenb.render.eta` predicts from the
plan, so `GRPO_COST_PER_ROLLOUT_TOKEN` can be checked on a machine. `bench/eta_replay.py` replays
the recordings through the monitor's ETA clock.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from primenb.backends.local import submit
from primenb.config import load_config
from primenb.protocol.rundir import FINAL_STATES, SFT_WARMUP, TRAINING
from primenb.render.eta import GRPO_COST_PER_ROLLOUT_TOKEN, grpo_per_sft

RESULTS = Path(__file__).resolve().parent / "results" / "eta_recordings.json"


def toml(args: argparse.Namespace, out: Path) -> str:
    return f"""max_steps = {args.steps}
seq_len = {args.seq_len}
output_dir = "{out}"

[model]
name = "primenb/tiny-byte"

[orchestrator]
batch_size = {args.batch}
group_size = 8

[orchestrator.train.sampling]
max_completion_tokens = {args.max_tokens}

[[orchestrator.train.source]]
name = "reverse-text"

[orchestrator.train.source.env.taskset]
id = "reverse-text"

[trainer]

[primenb]
sft_warmup_steps = {args.warmup}
logging_steps = 1
seed = 0
"""


def record(args: argparse.Namespace) -> dict[str, Any]:
    # the engine may still be closing its files as the run ends: cleaning up must not lose the recording
    with tempfile.TemporaryDirectory(prefix="primenb-eta-", ignore_cleanup_errors=True) as tmp:
        config = load_config(toml(args, Path(tmp)))
        t0 = time.monotonic()
        run = submit(config, name=f"eta-{args.name}")
        snaps: list[tuple[float, dict[str, Any]]] = []
        keys = ("state", "phase", "phase_step", "phase_total", "step", "max_steps", "warmup_step", "warmup_steps")
        while True:
            status = run.refresh()
            view = {k: status[k] for k in (*keys, "mode", "step_plan") if k in status}
            if not snaps or {k: snaps[-1][1].get(k) for k in keys} != {k: view.get(k) for k in keys}:
                snaps.append((round(time.monotonic() - t0, 2), view))
            if status.get("state") in FINAL_STATES:
                break
            time.sleep(0.2)
        if status.get("state") != "completed":
            raise SystemExit(f"the run ended {status.get('state')}: {status.get('error')}")
    what = (
        f"tiny-byte RL on reverse-text, sft_warmup_steps={args.warmup}, max_steps={args.steps}, "
        f"batch {args.batch}, group 8, {args.max_tokens} tokens, seq_len {args.seq_len}; "
        "recorded by bench/record_eta.py"
    )
    return {"what": what, "end": snaps[-1][0], "status": snaps}


def pace(recording: dict[str, Any], phase: str) -> float:
    """Seconds per step of ``phase`` from its first completed step to its last seen one."""
    seen = [(t, s.get("phase_step", 0)) for t, s in recording["status"] if s.get("phase") == phase]
    done = [(t, n) for t, n in seen if n and n >= 1]
    if len(done) < 2 or done[-1][1] == done[0][1]:
        raise SystemExit(f"too few {phase} steps were seen to time it; give it more steps")
    return (done[-1][0] - done[0][0]) / (done[-1][1] - done[0][1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the recording's key in the results file")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=100)
    parser.add_argument("--seq-len", type=int, default=256)
    args = parser.parse_args()
    recording = record(args)
    ratio = pace(recording, TRAINING) / pace(recording, SFT_WARMUP)
    plan = next((s["step_plan"] for _, s in recording["status"] if "step_plan" in s), None)
    predicted = grpo_per_sft(plan)
    per_token = ratio / (args.batch * args.max_tokens)
    print(
        f"{args.name}: a GRPO step costs {ratio:.2f} warm-up steps (predicted {predicted:.2f} from the plan); "
        f"{per_token:.2e} per rollout-token (the model uses {GRPO_COST_PER_ROLLOUT_TOKEN:.2e}); "
        f"run {recording['end']:.0f} s"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    saved = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    saved[args.name] = recording
    RESULTS.write_text(json.dumps(saved, indent=1))
    print(f"saved to {RESULTS}")


if __name__ == "__main__":
    main()
