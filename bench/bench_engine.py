"""primenb's engine against a bare TRL script: same model, data and GRPO settings, side by side.

Prints steady-state steps/s (target ratio >= 1.0), the time from launch to the first logged
step (target: within 2 s of the bare script), and where a step's time goes on each side (the
engine's own per-part clock, logged as "step profile" in engine.log; the bare script times its
reward functions). Runs alternate primenb / bare, ROUNDS times each. The machine's load average
is printed with the results: on a shared machine only the ratio of one side-by-side run means much.
The bare script runs with glibc's default malloc settings, as a user's TRL script would;
``BENCH_BARE_MALLOC=engine`` gives it the engine's (primenb/engine/allocator.py) to compare the
two on the same allocator.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from primenb import load_config
from primenb.backends.local import submit
from primenb.protocol.rundir import read_jsonl

ROOT = Path(__file__).resolve().parent
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
STEPS = int(os.environ.get("BENCH_STEPS", "80"))
MODES = os.environ.get("BENCH_MODES", "grpo,sft").split(",")  # e.g. BENCH_MODES=sft for the SFT half only
SFT_CONFIG = f"""max_steps = {STEPS * 3}

[model]
name = "primenb/tiny-byte"

[data]
name = "reverse-text"
batch_size = 64
micro_batch_size = 64
seq_len = 64

[optim]
lr = 1e-3

[primenb]
sample_every = {os.environ.get("BENCH_SAMPLE_EVERY", "10")}
"""
GRPO_CONFIG = f"""max_steps = {STEPS}
seq_len = 128

[model]
name = "primenb/tiny-byte"

[orchestrator]
batch_size = 32
group_size = 8

[orchestrator.train.sampling]
max_completion_tokens = 48

[[orchestrator.train.source]]
name = "reverse-text"

[orchestrator.train.source.env.taskset]
id = "reverse-text"

[trainer.optim]
lr = 5e-5
"""


def _rate(points: list[tuple[float, int]]) -> float:
    """Steps per second between the 5th log and the last (skips start-up and first steps)."""
    pts = points[5:]
    return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])


def sample_share(points: list[tuple[float, int]], sample_steps: set[int]) -> float:
    """The share of training wall time spent drawing SFT samples, from the run's own step times:
    a step that drew samples took longer than the median step by the samples' cost. Measured
    inside one run, so a busy machine shifts it less than the primenb / bare ratio."""
    gaps = {b[1]: b[0] - a[0] for a, b in itertools.pairwise(points) if b[1] == a[1] + 1}
    if not gaps:
        return float("nan")
    typical = statistics.median(gaps.values())
    extra = sum(max(0.0, gaps[s] - typical) for s in sample_steps if s in gaps)
    return extra / (points[-1][0] - points[0][0])


def step_profile(log_path: Path) -> dict[str, float]:
    """The engine's per-step milliseconds by part, from its "step profile" log line."""
    found: dict[str, float] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        if "step profile: " in line:
            found = json.loads(line.split("step profile: ", 1)[1])["parts_ms"]
    return found


def run_primenb(work: Path, i: int, config: str) -> tuple[float, float, Path, float, dict[str, float]]:
    os.chdir(work)
    t0 = time.time()
    run = submit(load_config(config), name=f"primenb-{i}-{int(t0)}")
    assert run.wait(timeout=900) == "completed", run.logs()
    rows = [r for r in read_jsonl(run.files.metrics_path) if "loss" in r and "step" in r and "train_loss" not in r]
    points = [(r["time"], r["step"]) for r in rows]
    sampled = {r["step"] for r in read_jsonl(run.files.samples_path)} - {0, points[-1][1]}  # start/end: outside
    profile = step_profile(run.files.log_path)
    return points[0][0] - t0, _rate(points), run.dir, sample_share(points, sampled), profile


def run_bare(run_dir: Path, work: Path, i: int) -> tuple[float, float, float]:
    out = work / f"bare-{i}.json"
    t0 = time.time()
    subprocess.run(
        [sys.executable, str(ROOT / "bare_trl.py"), str(run_dir), str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result = json.loads(out.read_text())
    points = [(t, step) for t, step, _ in result["logs"]]
    reward_ms = 1000 * float(result.get("reward_s", 0.0)) / max(1, points[-1][1])
    return points[0][0] - t0, _rate(points), reward_ms  # type: ignore[arg-type]


def _median_parts(profiles: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for p in profiles for k in p}
    return {k: statistics.median(p.get(k, 0.0) for p in profiles) for k in keys}


def print_breakdown(pr: float, br: float, parts: dict[str, float], bare_reward: float) -> None:
    """Milliseconds per step on each side, the engine's parts beside bare TRL's."""
    side = {k: parts.get(k, 0.0) for k in ("reward_funcs", "reward_wrapper", "eval", "samples", "checkpoints")}
    own = parts.get("callbacks", 0.0)  # the engine counts eval, samples and checkpoints apart
    p_step, b_step = 1000 / pr, 1000 / br
    rows = [
        ("reward functions", side["reward_funcs"], bare_reward),
        ("primenb reward wrapper (samples, counts)", side["reward_wrapper"], 0.0),
        ("primenb callbacks (metrics, status, stop)", own, 0.0),
        ("eval / sample sets / checkpoints", side["eval"] + side["samples"] + side["checkpoints"], 0.0),
    ]
    p_rest = p_step - sum(r[1] for r in rows)
    b_rest = b_step - bare_reward
    print("where a step's time goes, ms per step (median)      primenb   bare TRL")
    print(f"  step (1 / steady steps/s)                       {p_step:8.2f}   {b_step:8.2f}")
    for name, p, b in rows:
        print(f"  {name:<46}{p:8.2f}   {b:8.2f}")
    print(f"  TRL + torch (the rest)                          {p_rest:8.2f}   {b_rest:8.2f}")


def compare(label: str, config: str, work: Path) -> None:
    p_first, p_rate, b_first, b_rate, shares = [], [], [], [], []
    profiles: list[dict[str, float]] = []
    bare_rewards: list[float] = []
    for i in range(ROUNDS):
        first, rate, run_dir, share, profile = run_primenb(work, i, config)
        p_first.append(first)
        p_rate.append(rate)
        shares.append(share)
        profiles.append(profile)
        first, rate, reward_ms = run_bare(run_dir, work, i)
        b_first.append(first)
        b_rate.append(rate)
        bare_rewards.append(reward_ms)
    pr, br = statistics.median(p_rate), statistics.median(b_rate)
    pf, bf = statistics.median(p_first), statistics.median(b_first)
    print(f"{label}, {ROUNDS} rounds (median)")
    print(
        f"steps/s          primenb {pr:6.2f}   bare TRL {br:6.2f}   ratio {pr / br:.3f}"
        f"  target >= 1.0: {'PASS' if pr / br >= 1.0 else 'FAIL'}"
    )
    print(
        f"launch->1st step primenb {pf:6.2f}s  bare TRL {bf:6.2f}s  diff {pf - bf:+.2f}s"
        f"  target <= +2 s: {'PASS' if pf - bf <= 2 else 'FAIL'}"
    )
    if label.startswith("SFT"):
        print(f"time drawing samples (in-run) {statistics.median(shares):.1%}  (rounds {[f'{x:.1%}' for x in shares]})")
    print(
        f"(all rounds: primenb {[round(x, 2) for x in p_rate]} / {[round(x, 2) for x in p_first]}, "
        f"bare {[round(x, 2) for x in b_rate]} / {[round(x, 2) for x in b_first]})"
    )
    print_breakdown(pr, br, _median_parts(profiles), statistics.median(bare_rewards))
    print(f"bare TRL's malloc settings: {os.environ.get('BENCH_BARE_MALLOC', 'glibc defaults')}")
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}, {os.cpu_count()} CPUs")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="primenb-bench-engine-"))
    os.environ.setdefault("PRIME_HOME", str(work / "home"))
    if "grpo" in MODES:
        compare(f"GRPO, tiny-byte, batch 32 x group 8, {STEPS} steps", GRPO_CONFIG, work)
    if "sft" in MODES:
        compare(f"SFT, tiny-byte, batch 64, {STEPS * 3} steps", SFT_CONFIG, work)


if __name__ == "__main__":
    main()
