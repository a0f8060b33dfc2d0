"""The server against bare in-process ``model.generate``, on the embedded default.

Trains one tiny LoRA adapter (a few SFT steps), serves it, and prints side by side: tokens/s and
p50/p95 request latency at 1, 8 and 32 concurrent clients for the adapter through the endpoint vs
the same model's ``generate`` in this process (one request at a time), first-token latency with
streaming, and the server's weight and resident memory with 1 and 4 adapters.

Goals (docs/serve.md): >= 0.9x bare generate at 1 client; more total tokens/s at 8 than at 1 (not
met: requests are served one at a time, no batching across requests).
Run: ``python bench/bench_serve.py`` (BENCH_REQUESTS=N requests per level, default 32).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "32"))
TOKENS = 32
PROMPTS = ["abcdefg=", "hello=", "serving=", "primenb=", "benchmark="]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bare(ckpt: Path) -> tuple[float, list[float]]:
    """tokens/s and per-request latency of in-process greedy generate (one request at a time)."""
    import torch

    from primenb.engine.models import load_model

    model, tok, _ = load_model("primenb/tiny-byte", seed=1, init_from=str(ckpt))
    model.eval()
    lat, tokens = [], 0
    t0 = time.perf_counter()
    with torch.no_grad():
        for i in range(REQUESTS):
            s = time.perf_counter()
            enc = tok([PROMPTS[i % len(PROMPTS)]], return_tensors="pt", add_special_tokens=False)
            out = model.generate(**enc, max_new_tokens=TOKENS, min_new_tokens=TOKENS, do_sample=False, pad_token_id=0)
            tokens += out.shape[1] - enc["input_ids"].shape[1]
            lat.append(time.perf_counter() - s)
    return tokens / (time.perf_counter() - t0), lat


def served(url: str, model: str, clients: int) -> tuple[float, list[float]]:
    import openai

    async def run() -> tuple[float, list[float]]:
        ac = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
        sem = asyncio.Semaphore(clients)
        lat: list[float] = []
        tokens = 0

        async def one(i: int) -> None:
            nonlocal tokens
            async with sem:
                s = time.perf_counter()
                r = await ac.completions.create(
                    model=model, prompt=PROMPTS[i % len(PROMPTS)], max_tokens=TOKENS, temperature=0
                )
                lat.append(time.perf_counter() - s)
                tokens += r.usage.completion_tokens if r.usage else 0

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        wall = time.perf_counter() - t0
        await ac.close()
        return tokens / wall, lat

    return asyncio.run(run())


def first_token(url: str, model: str) -> float:
    import openai

    c = openai.OpenAI(base_url=url, api_key="none")
    times = []
    for p in PROMPTS:
        s = time.perf_counter()
        for ch in c.completions.create(model=model, prompt=p, max_tokens=TOKENS, temperature=0, stream=True):
            if ch.choices and ch.choices[0].text:
                break
        times.append(time.perf_counter() - s)
    return statistics.median(times)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    os.environ["PRIME_HOME"] = str(work / "home")
    os.chdir(work)
    from primenb import load_config
    from primenb.backends import submit
    from primenb.engine.models import resolve_checkpoint
    from primenb.serve import client
    from tests.tiny import sft_toml  # the one builder of tiny configs

    run = submit(load_config(sft_toml(steps=4, lr=3e-2, extra="\n[model.lora]\nrank = 4\nalpha = 8\n")), name="bench")
    assert run.wait(timeout=900) == "completed", run.logs()
    ckpt = resolve_checkpoint(run.dir / "checkpoints")
    model = "primenb/tiny-byte-adapter-bench"

    bare_tps, bare_lat = bare(ckpt)
    server = client.start(["bench"])
    try:
        served(server.url, model, 1)  # warm up
        rows = [("bare generate (in process)", 1, bare_tps, bare_lat)]
        for n in (1, 8, 32):
            tps, lat = served(server.url, model, n)
            rows.append((f"served adapter, {n} clients", n, tps, lat))
        print(f"{'':34} {'tokens/s':>9} {'p50 s':>7} {'p95 s':>7}")
        for name, _, tps, lat in rows:
            print(f"{name:34} {tps:9.1f} {pct(lat, 0.5):7.3f} {pct(lat, 0.95):7.3f}")
        print(f"served/bare at 1 client: {rows[1][2] / bare_tps:.2f}x (goal >= 0.9)")
        print(f"8 clients vs 1: {rows[2][2] / rows[1][2]:.2f}x (goal > 1)")
        print(f"first token (streaming, median): {first_token(server.url, model) * 1000:.1f} ms")
        one = client._admin(server, "GET", "/admin/stats")
        for i in range(3):
            client._admin(server, "POST", "/admin/models", {"id": f"copy-{i}", "checkpoint": str(ckpt)})
        four = client._admin(server, "GET", "/admin/stats")
        adapter = (ckpt / "adapter_model.safetensors").stat().st_size
        print(
            f"memory, 1 adapter: weights {one['weight_bytes'] / 2**20:.2f} MiB, "
            f"RSS {one['rss_bytes'] / 2**20:.0f} MiB; "
            f"4 adapters: weights {four['weight_bytes'] / 2**20:.2f} MiB, RSS {four['rss_bytes'] / 2**20:.0f} MiB "
            f"(adapter file {adapter / 1024:.0f} KiB)"
        )
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
