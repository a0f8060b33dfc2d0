"""primenb's engine against a bare TRL script: same model, data and GRPO settings, side by side.

Prints steady-state steps/s (target ratio >= 1.0), the time from launch to the first logged
step (target: within 2 s of the bare script), and where a step's time goes on each side (the
engine's own per-part clock, logged as "step profile" in engine.log; the bare script times its
reward functions). Runs alternate primenb / bare, ROUNDS times each. The machine's load average
is printed with the results: on a shared machine only the ratio of one side-by-side run means much.
The bare script runs with glibc's default malloc settings, as a user's TRL script would;
``BENCH_BARE_MALLOC=engine`` gives it the engine's (primenb/engine/allocator.py) to compare the
two on the same allocator.

Two more halves time the episode path (verifiers' own episodes against the policy server inside
the training process, primenb/engine/episodes.py), in small runs (batch 8 = 2 prompts x group 4,
``BENCH_EPISODE_STEPS`` steps; steps/s and tokens/s from the second logged step on):

- ``BENCH_MODES=episodes``: one-turn reverse-text three ways: the engine's own generation, the
  episode path (bench/vf_envs/reverse_text_episode: the same strings and reward as a verifiers
  taskset with its own Env, which only the episode path runs) and bare TRL.
- ``BENCH_MODES=turns``: the built-in two-turn ``reverse-turns`` through the episode path and
  through TRL's own multi-turn loop, ``GRPOTrainer(environment_factory=...)`` (bench/trl_turns.py,
  which says what TRL's loop cannot express and how the bench bridges it).
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
VF_ENVS = ROOT / "vf_envs"  # the bench-only taskset reverse-text-episode
EPISODE_STEPS = int(os.environ.get("BENCH_EPISODE_STEPS", "5"))
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


Points = list[tuple[float, int, float]]  # (time, step, TRL's num_tokens) of each logged step
AGENT = """
[orchestrator.train.source.env.agent]
max_turns = 4

[orchestrator.train.source.env.agent.harness]
id = "null"

[orchestrator.train.source.env.agent.runtime]
type = "subprocess"
"""


def small_grpo(taskset: str, *, episodes: bool, max_tokens: int, seq_len: int, args: str = "") -> str:
    """The episode halves' config: batch 8 (2 prompts x group 4); ``episodes`` adds the agent seat
    (harness null, runtime subprocess) a verifiers taskset with its own Env plays in."""
    return f"""max_steps = {EPISODE_STEPS}
seq_len = {seq_len}

[model]
name = "primenb/tiny-byte"

[orchestrator]
batch_size = 8
group_size = 4

[orchestrator.train.sampling]
max_completion_tokens = {max_tokens}

[[orchestrator.train.source]]
name = "{taskset}"

[orchestrator.train.source.env.taskset]
id = "{taskset}"
{args}{AGENT if episodes else ""}
[trainer.optim]
lr = 5e-5
"""


def primenb_points(work: Path, name: str, config: str) -> tuple[Points, Path]:
    os.chdir(work)
    run = submit(load_config(config), name=f"{name}-{int(time.time())}")
    assert run.wait(timeout=1800) == "completed", run.logs()
    rows = [r for r in read_jsonl(run.files.metrics_path) if "loss" in r and "train_loss" not in r]
    return [(r["time"], r["step"], float(r.get("num_tokens", 0.0))) for r in rows], run.dir


def script_points(script: str, run_dir: Path, out: Path) -> tuple[Points, dict[str, object]]:
    """A baseline script's logged steps (it writes [time, step, num_tokens] per log call to ``out``)."""
    subprocess.run(
        [sys.executable, str(ROOT / script), str(run_dir), str(out)],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    result = json.loads(out.read_text())
    # the training summary's log call carries no num_tokens: only the steps' calls count
    return [(t, int(step), float(tokens)) for t, step, tokens in result["logs"] if tokens], result


def rates(points: Points) -> tuple[float, float]:
    """Steps/s and tokens/s from the second logged step to the last: the first step of an episode
    run also starts the policy server and the environment's serving resources."""
    a, b = points[1], points[-1]
    return (b[1] - a[1]) / (b[0] - a[0]), (b[2] - a[2]) / (b[0] - a[0])


def print_sides(label: str, results: dict[str, list[Points]], reference: str) -> None:
    """One line per side: median steps/s, tokens/s and tokens per step, and each side's ratio to
    ``reference`` (goal: the episode path at >= 1.0x of it)."""
    print(f"{label}, {ROUNDS} rounds (median; steps/s and tokens/s from step 2 to {EPISODE_STEPS})")
    med = {k: tuple(statistics.median(x) for x in zip(*(rates(p) for p in v), strict=True)) for k, v in results.items()}
    ref_steps, ref_tokens = med[reference]
    for side, (steps, tokens) in med.items():
        per_step = tokens / steps
        ratio = f"{steps / ref_steps:.3f}x steps/s, {tokens / ref_tokens:.3f}x tokens/s of {reference}"
        print(f"  {side:<30} {steps:6.3f} steps/s {tokens:8.1f} tokens/s {per_step:7.1f} tokens/step  {ratio}")
    for side, runs in results.items():
        print(f"  ({side}, all rounds: {[tuple(round(x, 3) for x in rates(p)) for p in runs]})")
    print(f"load average (1, 5, 15 min) at the end: {os.getloadavg()}, {os.cpu_count()} CPUs")


def compare_one_turn(work: Path) -> None:
    """One-turn reverse-text: the engine's own generation, the episode path, bare TRL."""
    engine = small_grpo("reverse-text", episodes=False, max_tokens=48, seq_len=128)
    episode = small_grpo("reverse-text-episode", episodes=True, max_tokens=48, seq_len=128)
    results: dict[str, list[Points]] = {"episode path": [], "engine's own generation": [], "bare TRL": []}
    for i in range(ROUNDS):
        results["episode path"].append(primenb_points(work, f"episode-{i}", episode)[0])
        points, run_dir = primenb_points(work, f"one-turn-{i}", engine)
        results["engine's own generation"].append(points)
        results["bare TRL"].append(script_points("bare_trl.py", run_dir, work / f"bare-{i}.json")[0])
    label = f"one-turn reverse-text, tiny-byte, batch 8 = 2 x group 4, 48 tokens, {EPISODE_STEPS} steps"
    print_sides(label, results, "engine's own generation")
    print_sides(label + " (against bare TRL)", {k: results[k] for k in ("episode path", "bare TRL")}, "bare TRL")


def compare_turns(work: Path) -> None:
    """Two-turn reverse-turns: the episode path against TRL's environment_factory loop."""
    config = small_grpo("reverse-turns", episodes=True, max_tokens=12, seq_len=256, args="num_tasks = 200\n")
    results: dict[str, list[Points]] = {"episode path": [], "TRL environment_factory": []}
    turns: list[float] = []
    for i in range(ROUNDS):
        points, run_dir = primenb_points(work, f"turns-{i}", config)
        results["episode path"].append(points)
        points, result = script_points("trl_turns.py", run_dir, work / f"trl-turns-{i}.json")
        results["TRL environment_factory"].append(points)
        played = list(result.get("turns") or [])  # type: ignore[call-overload]
        turns.append(sum(played) / max(1, len(played)))
    label = f"two-turn reverse-turns, tiny-byte, batch 8 = 2 x group 4, 12 tokens a turn, {EPISODE_STEPS} steps"
    print_sides(label, results, "TRL environment_factory")
    print(f"  (model turns per TRL rollout, per round: {turns}; the episode path logs episodes/turns)")


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="primenb-bench-engine-"))
    os.environ.setdefault("PRIME_HOME", str(work / "home"))
    if {"episodes", "turns"} & set(MODES):  # the bench taskset, for this process and the runs it starts
        sys.path.insert(0, str(VF_ENVS))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VF_ENVS), os.environ.get("PYTHONPATH")]))
    if "episodes" in MODES:
        compare_one_turn(work)
    if "turns" in MODES:
        compare_turns(work)
    if "grpo" in MODES:
        compare(f"GRPO, tiny-byte, batch 32 x group 8, {STEPS} steps", GRPO_CONFIG, work)
    if "sft" in MODES:
        compare(f"SFT, tiny-byte, batch 64, {STEPS * 3} steps", SFT_CONFIG, work)


if __name__ == "__main__":
    main()
