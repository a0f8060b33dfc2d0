"""The serving scheduler on a GPU (run where one is lent; CI never runs this): the embedded
~0.5 B Qwen2-shaped byte model (random weights, no download) and two random LoRA adapters on it.

Prints, side by side in one run: tokens/s of the scheduler with 1, 8, 32 and 64 requests in flight
(8 and 32 spread over the base and both adapters), bare batched ``generate`` at batch 32 (the
ceiling), transformers' ``generate_batch`` (continuous batching, base only); and whether batching
changed any answer (greedy, and sampled with a seed) on this device. Writes the same as JSON to
``$OUT/serve_gpu.json`` when OUT is set.
Run: ``python bench/bench_serve_gpu.py``
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MODEL = os.environ.get("BENCH_MODEL", "primenb/byte-0.5b")
TOKENS = int(os.environ.get("BENCH_TOKENS", "64"))
PROMPTS = [f"prompt number {i}, please continue=" for i in range(64)]


def adapter(root: Path, name: str, seed: int) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model

    from primenb.engine.models import CHECKPOINT_META, build_tiny_model

    ckpt = root / name / "checkpoints" / "step_1"
    model = get_peft_model(
        build_tiny_model(MODEL, 0), LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"])
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if "lora_" in pname:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    model.save_pretrained(str(ckpt))
    (ckpt / CHECKPOINT_META).write_text(json.dumps({"base": {"name": MODEL, "seed": 0, "path": None}}))
    return ckpt


def run(scheduler: Any, jobs: list[tuple[str, str, dict[str, Any]]]) -> tuple[list[str], float, int]:
    """Submit every job at once; their texts, the wall time and the tokens decoded."""
    from primenb.engine.serve_requests import Delta, Done, Failed, GenRequest, Sampling

    texts = [""] * len(jobs)
    tokens = [0]
    left = threading.Semaphore(0)

    def emitter(i: int) -> Any:
        def emit(event: Any) -> None:
            if isinstance(event, Delta):
                texts[i] += event.text
            elif isinstance(event, Done):
                tokens[0] += event.completion_tokens
                left.release()
            elif isinstance(event, Failed):
                raise SystemExit(str(event.error))

        return emit

    t0 = time.perf_counter()
    for i, (model, prompt, sampling) in enumerate(jobs):
        req = GenRequest(model, prompt, Sampling(max_tokens=TOKENS, ignore_eos=True, **sampling))
        req.emit = emitter(i)
        scheduler.submit(req)
    for _ in jobs:
        left.acquire()
    return texts, time.perf_counter() - t0, tokens[0]


def bare_generate(pool: Any, batch: int) -> float:
    import torch

    entry = pool.entry(MODEL)
    model, tok = pool.model_for(entry.base_key), pool.tokenizer_for(entry)
    tok.padding_side = "left"
    enc = tok(PROMPTS[:batch], return_tensors="pt", padding=True, add_special_tokens=False).to(pool.device)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    with torch.no_grad():
        sync()
        t0 = time.perf_counter()
        out = base.generate(**enc, max_new_tokens=TOKENS, min_new_tokens=TOKENS, do_sample=False, pad_token_id=0)
        sync()
    return (out.shape[1] - enc["input_ids"].shape[1]) * batch / (time.perf_counter() - t0)


def transformers_cb(batch: int) -> float:
    import torch
    from transformers import GenerationConfig

    from primenb.engine.models import build_byte_tokenizer, build_tiny_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, tok = build_tiny_model(MODEL, 0).to(device).eval(), build_byte_tokenizer()
    prompts = [tok(p)["input_ids"] for p in PROMPTS[:batch]]
    config = GenerationConfig(max_new_tokens=TOKENS, do_sample=False, eos_token_id=-1, pad_token_id=0)
    model.generate_batch(prompts[:2], generation_config=config, max_new_tokens=4)  # warm-up
    t0 = time.perf_counter()
    out = model.generate_batch(prompts, generation_config=config, max_new_tokens=TOKENS)
    return sum(len(o.generated_tokens) for o in out.values()) / (time.perf_counter() - t0)


def main() -> int:
    import torch

    from primenb.engine.batching import Scheduler
    from primenb.engine.serving import ModelPool

    root = Path(tempfile.mkdtemp())
    pool = ModelPool(device="cuda" if torch.cuda.is_available() else "cpu")
    pool.add_base(MODEL, MODEL)
    for i, name in enumerate(("ada", "adb")):
        pool.add_checkpoint(name, str(adapter(root, name, i + 1)), model_name=MODEL)
    sched = Scheduler(pool, max_batch=64).start()
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    models = [MODEL, "ada", "adb"]
    run(sched, [(MODEL, PROMPTS[0], {"temperature": 0})])  # warm-up
    for n in (1, 8, 32, 64):
        jobs = [(models[i % 3] if n > 1 else "ada", PROMPTS[i], {"temperature": 0}) for i in range(n)]
        _, wall, tokens = run(sched, jobs)
        out[f"scheduler_{n}_tok_s"] = round(tokens / wall, 1)
    out["mean_batch"] = sched.stats()["mean_batch"]
    for kind, sampling in (("greedy", {"temperature": 0}), ("seeded", {"temperature": 1.0, "seed": 3})):
        jobs = [(models[i % 3], PROMPTS[i], sampling) for i in range(16)]
        alone = [run(sched, [job])[0][0] for job in jobs]
        batched, _, _ = run(sched, jobs)
        out[f"{kind}_same_alone_and_batched"] = f"{sum(a == b for a, b in zip(alone, batched, strict=True))}/16"
    sched.close()
    out["bare_generate_32_tok_s"] = round(bare_generate(pool, 32), 1)
    try:
        out["transformers_generate_batch_32_tok_s"] = round(transformers_cb(32), 1)
    except Exception as exc:  # reported, not fatal: the comparison is informational
        out["transformers_generate_batch_32_tok_s"] = f"failed: {type(exc).__name__}: {exc}"[:300]
    out["scheduler_32_vs_1"] = round(out["scheduler_32_tok_s"] / out["scheduler_1_tok_s"], 2)
    out["scheduler_32_vs_bare_32"] = round(out["scheduler_32_tok_s"] / out["bare_generate_32_tok_s"], 2)
    print(json.dumps(out, indent=1))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "serve_gpu.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
