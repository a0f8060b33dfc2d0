"""primenb against bare TRL on a GPU: a ~0.5 B Qwen2-shaped model built from config (no
download), bf16, full fine-tune and LoRA. Reports tokens/s, peak GPU memory and MFU, side by side.

    bash bench/gpu.sh                 # on a machine with an NVIDIA GPU (about 6-8 minutes)
    python bench/bench_gpu.py --smoke # the same code paths on a CPU with the tiny model

MFU counts 6 x params FLOPs per token for a full fine-tune and 4 x params for LoRA (no weight
gradients for the frozen base), against the GPU's dense bf16 peak (PEAK_TFLOPS, default 989 for
H100/H200 SXM).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from primenb import load_config
from primenb.backends.local import submit
from primenb.engine.models_info import TINY_MODELS, TINY_SIZES
from primenb.protocol.rundir import read_jsonl

ROOT = Path(__file__).resolve().parent


def config(model: str, steps: int, batch: int, lora: bool) -> str:
    text = f"""max_steps = {steps}

[model]
name = "{model}"
"""
    if lora:
        text += "\n[model.lora]\nrank = 16\nalpha = 32\n"
    return (
        text
        + f"""
[data]
name = "reverse-text"
batch_size = {batch}
micro_batch_size = {batch}
seq_len = 128

[optim]
lr = {"2e-4" if lora else "5e-5"}

[primenb]
sample_every = 1000000
"""
    )


class GpuMemory:
    """Peak memory of the GPU while a command runs, polled with nvidia-smi (0 without one)."""

    def __init__(self) -> None:
        self.peak_mib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.5):
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout
                self.peak_mib = max(self.peak_mib, max(int(x) for x in out.split()))
            except (OSError, ValueError, subprocess.SubprocessError):
                return

    def __enter__(self) -> GpuMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def tokens_per_s(points: list[tuple[float, float]]) -> float:
    pts = [p for p in points if p[1] > 0][2:]  # skip start-up
    return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0]) if len(pts) > 1 else float("nan")


def run_pair(model: str, steps: int, batch: int, lora: bool, work: Path) -> dict[str, dict[str, float]]:
    os.chdir(work)
    name = f"{'lora' if lora else 'full'}-{int(time.time())}"
    with GpuMemory() as mem:
        run = submit(load_config(config(model, steps, batch, lora)), name=name)
        state = run.wait(timeout=600)
    if state != "completed":
        raise SystemExit(f"primenb run {state}: {run.status.get('error')}\n{run.logs(30)}")
    rows = [r for r in read_jsonl(run.files.metrics_path) if "num_tokens" in r]
    primenb = {"tokens_s": tokens_per_s([(r["time"], r["num_tokens"]) for r in rows]), "peak_mib": mem.peak_mib}
    out = work / f"{name}-bare.json"
    with GpuMemory() as mem:
        subprocess.run([sys.executable, str(ROOT / "bare_trl.py"), str(run.dir), str(out)], check=True)
    data = json.loads(out.read_text())
    bare = {"tokens_s": tokens_per_s([(t, n) for t, _, n in data["logs"]]), "peak_mib": mem.peak_mib}
    return {"primenb": primenb, "bare TRL": bare}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="tiny model, few steps (CPU check of the script)")
    args = parser.parse_args()
    model = "primenb/tiny-byte" if args.smoke else "primenb/byte-0.5b"
    steps, batch = (12, 16) if args.smoke else (60, 64)
    params = TINY_SIZES[TINY_MODELS[model]]["params"]
    peak_flops = float(os.environ.get("PEAK_TFLOPS", "989")) * 1e12
    work = Path(tempfile.mkdtemp(prefix="primenb-bench-gpu-"))
    os.environ.setdefault("PRIME_HOME", str(work / "home"))
    print(f"model {model} ({params / 1e6:.0f} M params), SFT batch {batch}, {steps} steps, bf16 where CUDA")
    for lora in (False, True):
        result = run_pair(model, steps, batch, lora, work)
        flops_per_token = (4 if lora else 6) * params
        label = "LoRA r16" if lora else "full FT "
        for who, r in result.items():
            mfu = r["tokens_s"] * flops_per_token / peak_flops
            print(f"{label} {who:8s}: {r['tokens_s']:10.0f} tokens/s  peak GPU {r['peak_mib']:6d} MiB  MFU {mfu:6.2%}")
        ratio = result["primenb"]["tokens_s"] / result["bare TRL"]["tokens_s"]
        print(f"{label} ratio primenb / bare TRL tokens/s: {ratio:.3f}")


if __name__ == "__main__":
    main()
