"""The batching server against its ceiling, side by side in one run, on the embedded default.

Trains three tiny LoRA adapters of one base (a few SFT steps each), serves them, and prints:
- bare batched ``generate`` of the same base + adapter in this process, batch 8 (the ceiling), and
  transformers' own continuous batching (``generate_batch``) on the base, for the choice of engine;
- the server at 1, 8 and 32 concurrent clients on one adapter, and 8 clients over 3 adapters:
  tokens/s, p50/p95 request latency, median time to first token (streaming);
- 8 clients against the same server started with ``--stream-interval N`` (vLLM's option: a
  chunk every N tokens of a choice) for each N of ``BENCH_STREAM_INTERVALS`` (default 4,8), and
  against a server running the code of ``BENCH_STREAM_BASELINE_REF`` (default c60d131, the last
  commit before streams coalesced their waiting events), checked out beside this one;
- a tool-call round trip through the `openai` client on the tool-calling checkpoint of
  ``tests/serve/toolmodel.py`` (fitted here, ~90 s, added with ``POST /admin/models``): a request
  with tools, its parsed call, the tool's result sent back, the final answer; not streamed and
  streamed (the client's stream helpers); p50 latency and the fraction that parsed to the call
  and the answer the checkpoint was fitted on (``BENCH_TOOL_TRIPS`` each, default 20);
- the time from a dropped stream to its freed row, in seconds and in decode steps;
- weights and resident memory with 1 and 4 adapters;
- ``primenb eval -n N -r 4`` through this server, against the same eval run by the code of a
  baseline commit (``BENCH_BASELINE_REF``, default: the last commit before the batching server)
  checked out beside this one, when git can provide it.

Every request decodes exactly ``TOKENS`` tokens (``ignore_eos``), as ``min_new_tokens`` makes the
bare generate do, so tokens/s compare like for like. Each level is measured ``BENCH_ROUNDS`` times
(default 3), alternating, and the median printed.

Goals (docs/serve.md): 8 clients >= 4x the tokens/s of 1 client; the server >= 0.8x bare batched
generate at batch 8; a dropped stream frees its row within one decode step; the eval >= 3x faster
than the baseline's.
Run: ``python bench/bench_serve.py`` (BENCH_REQUESTS per level, default 32; BENCH_EVAL_N, default 100,
0 skips the eval).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REQUESTS = int(os.environ.get("BENCH_REQUESTS", "32"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
EVAL_N = int(os.environ.get("BENCH_EVAL_N", "100"))
BASELINE_REF = os.environ.get("BENCH_BASELINE_REF", "05efea3")
STREAM_BASELINE_REF = os.environ.get("BENCH_STREAM_BASELINE_REF", "c60d131")
INTERVALS = [int(x) for x in os.environ.get("BENCH_STREAM_INTERVALS", "4,8").split(",") if x.strip()]
TOOL_TRIPS = int(os.environ.get("BENCH_TOOL_TRIPS", "20"))
TOOL_AGENT = "tool-agent"
TOKENS = 32
PROMPTS = ["abcdefg=", "hello=", "serving=", "primenb=", "benchmark=", "tokens=", "batching=", "queue="]
LORA = "\n[model.lora]\nrank = 4\nalpha = 8\n"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def bare_batched(ckpt: Path, threads: int, batch: int = 8) -> float:
    """tokens/s of in-process greedy ``generate`` on left-padded batches of ``batch`` prompts, with
    ``threads`` torch threads."""
    import torch

    from primenb.engine.models import load_model

    model, tok, _ = load_model("primenb/tiny-byte", init_from=str(ckpt))
    model.eval()
    tokens = 0
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    with torch.no_grad():
        for start in range(0, REQUESTS, batch):
            prompts = [PROMPTS[i % len(PROMPTS)] for i in range(start, min(REQUESTS, start + batch))]
            enc = tok(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
            out = model.generate(
                **enc, max_new_tokens=TOKENS, min_new_tokens=TOKENS, do_sample=False, pad_token_id=0, eos_token_id=None
            )
            tokens += (out.shape[1] - enc["input_ids"].shape[1]) * len(prompts)
    seconds = time.perf_counter() - t0
    torch.set_num_threads(before)
    return tokens / seconds


def transformers_cb() -> float:
    """tokens/s of transformers' own continuous batching (``generate_batch``) on the base model, all
    ``REQUESTS`` prompts at once. It has no LoRA routing per request and no per-request seed, so it
    could not serve primenb's adapters; measured for the docs' choice of engine."""
    from transformers import GenerationConfig

    from primenb.engine.models import build_byte_tokenizer, build_tiny_model

    model, tok = build_tiny_model("primenb/tiny-byte", 0).eval(), build_byte_tokenizer()
    prompts = [tok(PROMPTS[i % len(PROMPTS)])["input_ids"] for i in range(REQUESTS)]
    config = GenerationConfig(max_new_tokens=TOKENS, do_sample=False, eos_token_id=-1, pad_token_id=0)
    t0 = time.perf_counter()
    out = model.generate_batch(prompts, generation_config=config, max_new_tokens=TOKENS)
    return sum(len(o.generated_tokens) for o in out.values()) / (time.perf_counter() - t0)


def served(url: str, models: list[str], clients: int) -> tuple[float, list[float], list[float]]:
    """tokens/s, request latencies and times to first token of ``REQUESTS`` streamed requests,
    ``clients`` at a time, spread over ``models``."""
    import openai

    async def run() -> tuple[float, list[float], list[float]]:
        ac = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=600)
        sem = asyncio.Semaphore(clients)
        lat: list[float] = []
        ttft: list[float] = []
        tokens = 0

        async def one(i: int) -> None:
            nonlocal tokens
            async with sem:
                s = time.perf_counter()
                first = None
                stream = await ac.completions.create(
                    model=models[i % len(models)],
                    prompt=PROMPTS[i % len(PROMPTS)],
                    max_tokens=TOKENS,
                    temperature=0,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_body={"ignore_eos": True},
                )
                async for chunk in stream:
                    if first is None and chunk.choices and chunk.choices[0].text:
                        first = time.perf_counter() - s
                    if chunk.usage is not None:
                        tokens += chunk.usage.completion_tokens
                lat.append(time.perf_counter() - s)
                ttft.append(first if first is not None else lat[-1])

        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        wall = time.perf_counter() - t0
        await ac.close()
        return tokens / wall, lat, ttft

    return asyncio.run(run())


def dropped_stream(server: Any, model: str) -> tuple[float, int]:
    """Seconds and decode steps from hanging up on a stream to its row leaving the batch."""
    import httpx

    from primenb.serve import client

    body = {"model": model, "prompt": "hello=", "max_tokens": 1500, "stream": True, "ignore_eos": True}
    with httpx.Client(timeout=60) as h, h.stream("POST", f"{server.url}/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break
        steps = client._admin(server, "GET", "/admin/stats")["steps"]
        t0 = time.perf_counter()
    while True:
        stats = client._admin(server, "GET", "/admin/stats")
        if stats["rows_in_flight"] == 0:
            return time.perf_counter() - t0, int(stats["steps"]) - int(steps)
        time.sleep(0.002)


def tool_trip(oai: Any, *, stream: bool) -> tuple[float, bool]:
    """The latency of one tool-call round trip through ``oai`` (an `openai` client) and whether it
    gave the call and the answer the checkpoint was fitted on."""
    from tests.serve.toolmodel import ANSWER, CALL_ARGS, weather_tool

    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    kw: dict[str, Any] = {"model": TOOL_AGENT, "tools": [weather_tool()], "temperature": 0}

    def ask(messages: list[Any], max_tokens: int) -> Any:
        if not stream:
            return oai.chat.completions.create(messages=messages, max_tokens=max_tokens, **kw).choices[0]
        with oai.chat.completions.stream(messages=messages, max_tokens=max_tokens, **kw) as events:
            return events.get_final_completion().choices[0]

    t0 = time.perf_counter()
    first = ask(question, 120)
    calls = first.message.tool_calls or []
    if first.finish_reason != "tool_calls" or len(calls) != 1:
        return time.perf_counter() - t0, False
    call = calls[0]
    try:
        args = json.loads(call.function.arguments)
    except ValueError:
        args = None
    result = {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}
    sent = {
        "id": call.id,
        "type": "function",
        "function": {"name": call.function.name, "arguments": call.function.arguments},
    }
    final = ask([*question, {"role": "assistant", "content": None, "tool_calls": [sent]}, result], 60)
    seconds = time.perf_counter() - t0
    return seconds, call.function.name == "get_weather" and args == CALL_ARGS and final.message.content == ANSWER


def tool_round_trips(servers: dict[str, Any], checkpoint: Path) -> None:
    """The tool-calling checkpoint on this code's server (and the first interval's), round trips
    not streamed and streamed, alternating, after one to warm up each."""
    import openai

    from primenb.serve import client

    keys = ["this", *(f"interval {k}" for k in INTERVALS[:1])]
    oai = {k: openai.OpenAI(base_url=servers[k].url, api_key="none", max_retries=0, timeout=120) for k in keys}
    for key in keys:
        client._admin(servers[key], "POST", "/admin/models", {"id": TOOL_AGENT, "checkpoint": str(checkpoint)})
    trips = [("not streamed", "this", False), ("streamed", "this", True)]
    trips += [(f"streamed, --stream-interval {k}", f"interval {k}", True) for k in INTERVALS[:1]]
    for _, key, stream in trips:
        tool_trip(oai[key], stream=stream)  # warm up
    done: dict[str, list[tuple[float, bool]]] = {name: [] for name, _, _ in trips}
    for _ in range(TOOL_TRIPS):  # the modes alternate
        for name, key, stream in trips:
            done[name].append(tool_trip(oai[key], stream=stream))
    for c in oai.values():
        c.close()
    print(f"tool-call round trip (openai client, one at a time, {TOOL_TRIPS} each): p50 s, parsed right")
    for name, got in done.items():
        print(f"  {name:40} {pct([t for t, _ in got], 0.5):7.3f}  {sum(ok for _, ok in got)}/{len(got)}")
    client._admin(servers["this"], "DELETE", f"/admin/models/{TOOL_AGENT}")


def start_servers(work: Path, traces: list[str]) -> dict[str, Any]:
    """This code's server; one per stream interval; the stream baseline's, when git can check it out."""
    from primenb.serve import client

    servers = {"this": client.start(traces)}
    for k in INTERVALS:
        servers[f"interval {k}"] = client.start(traces, stream_interval=k)
    base = checkout(work / "stream-baseline", STREAM_BASELINE_REF)
    if base is not None:
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(base)  # the worker process imports the baseline's primenb
        try:
            servers["baseline"] = client.start(traces)
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old
    return servers


def eval_seconds(python: list[str], env: dict[str, str], trace: str) -> float:
    """Wall time of ``primenb eval TRACE BASE --env reverse-text -n N -r 4``, starting its own server."""
    cmd = [*python, "-m", "primenb.cli", "eval", trace, "primenb/tiny-byte", "--env", "reverse-text"]
    cmd += ["-n", str(EVAL_N), "-r", "4"]
    cmd += ["--temperature", "1.0", "--json"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    return wall


def checkout(dest: Path, ref: str) -> Path | None:
    """A commit's primenb, checked out beside this one (None when git cannot)."""
    cmd = ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(dest), ref]
    made = subprocess.run(cmd, capture_output=True)
    return dest if made.returncode == 0 else None


def remove_checkout(dest: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(dest)], capture_output=True)


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    os.environ["PRIME_HOME"] = str(work / "home")
    os.chdir(work)
    from primenb import load_config
    from primenb.backends import submit
    from primenb.engine.models import resolve_checkpoint
    from primenb.serve import client
    from tests.tiny import sft_toml  # the one builder of tiny configs

    runs = {
        name: submit(load_config(sft_toml(steps=4, lr=lr, extra=LORA)), name=name)
        for name, lr in (("bench", 3e-2), ("bench2", 1e-2), ("bench3", 3e-3))
    }
    for run in runs.values():
        assert run.wait(timeout=900) == "completed", run.logs()
    ckpt = resolve_checkpoint(runs["bench"].dir / "checkpoints")
    ada, adapters = "primenb/tiny-byte-adapter-bench", [f"primenb/tiny-byte-adapter-{n}" for n in runs]
    from tests.serve.toolmodel import fit

    t0 = time.perf_counter()
    tool_ckpt = fit(work / "toolrun")  # before any server: it trains on every core
    print(f"tool-calling checkpoint fitted in {time.perf_counter() - t0:.0f} s")

    # (row, server, models, clients)
    levels = [("served, 1 client", "this", [ada], 1), ("served, 8 clients", "this", [ada], 8)]
    levels += [("served, 32 clients", "this", [ada], 32), ("served, 8 clients over 3 adapters", "this", adapters, 8)]
    levels += [(f"served, 8 clients, --stream-interval {k}", f"interval {k}", [ada], 8) for k in INTERVALS]
    servers = start_servers(work, list(runs))
    if "baseline" in servers:
        levels.append((f"served, 8 clients, {STREAM_BASELINE_REF} (before)", "baseline", [ada], 8))
    results: dict[str, list[tuple[float, list[float], list[float]]]] = {name: [] for name, *_ in levels}
    server = servers["this"]
    import torch

    # the ceiling: bare generate with torch's own thread count and with the server's (one core fewer)
    thread_counts = sorted({torch.get_num_threads(), max(1, len(os.sched_getaffinity(0)) - 1)})
    bare: dict[int, list[float]] = {t: [] for t in thread_counts}
    cb: list[float] = []
    try:
        for s in servers.values():
            served(s.url, [ada], 8)  # warm up
        for _ in range(ROUNDS):
            for t in thread_counts:
                bare[t].append(bare_batched(ckpt, t))
            cb.append(transformers_cb())
            for name, key, models, clients in levels:
                results[name].append(served(servers[key].url, models, clients))
        tps = {name: statistics.median(r[0] for r in rs) for name, rs in results.items()}
        print(f"{'':44} {'tokens/s':>9} {'p50 s':>7} {'p95 s':>7} {'TTFT p50 s':>10}")
        for t, values in bare.items():
            print(f"{f'bare batched generate, batch 8, {t} thr':44} {statistics.median(values):9.1f}")
        ceiling = max(statistics.median(v) for v in bare.values())
        print(f"{'transformers generate_batch (base, all)':44} {statistics.median(cb):9.1f}")
        for name, rs in results.items():
            lat = [x for r in rs for x in r[1]]
            ttft = [x for r in rs for x in r[2]]
            print(f"{name:44} {tps[name]:9.1f} {pct(lat, 0.5):7.3f} {pct(lat, 0.95):7.3f} {pct(ttft, 0.5):10.3f}")
        one, eight = tps["served, 1 client"], tps["served, 8 clients"]
        print(f"8 clients vs 1: {eight / one:.2f}x (goal >= 4)")
        for name, *_ in levels:
            if name.startswith("served, 8 clients") and "adapters" not in name:
                print(f"{name} / bare batch 8: {tps[name] / ceiling:.2f}x (goal >= 0.8)")
        if "baseline" in servers:
            before = tps[f"served, 8 clients, {STREAM_BASELINE_REF} (before)"]
            print(f"served 8 clients, this code / {STREAM_BASELINE_REF}: {eight / before:.2f}x")

        tool_round_trips(servers, tool_ckpt)
        drops = [dropped_stream(server, ada) for _ in range(5)]
        print(
            f"dropped stream -> row freed: median {statistics.median(d[0] for d in drops) * 1000:.0f} ms, "
            f"max {max(d[1] for d in drops)} decode steps (goal <= 1)"
        )
        first = client._admin(server, "GET", "/admin/stats")
        for i in range(4 - len(runs) + 1):
            client._admin(server, "POST", "/admin/models", {"id": f"copy-{i}", "checkpoint": str(ckpt)})
        four = client._admin(server, "GET", "/admin/stats")
        print(
            f"memory: {len(runs)} adapters weights {first['weight_bytes'] / 2**20:.2f} MiB RSS "
            f"{first['rss_bytes'] / 2**20:.0f} MiB; {len(four['models']) - 1} adapters weights "
            f"{four['weight_bytes'] / 2**20:.2f} MiB RSS {four['rss_bytes'] / 2**20:.0f} MiB"
        )
    finally:
        for s in servers.values():
            s.stop()
        if (work / "stream-baseline").exists():
            remove_checkout(work / "stream-baseline")
    if EVAL_N > 0:
        compare_evals(work)
    return 0


def compare_evals(work: Path) -> None:
    """The same eval by this code and by the baseline commit's, each against its own server."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    ours = eval_seconds([sys.executable], env, "bench")
    base = checkout(work / "baseline", BASELINE_REF)
    if base is None:
        print(f"eval -n {EVAL_N} -r 4: {ours:.1f} s (baseline {BASELINE_REF} not available from git)")
        return
    try:
        theirs = eval_seconds([sys.executable], {**env, "PYTHONPATH": str(base)}, "bench")
        print(f"eval -n {EVAL_N} -r 4: {ours:.1f} s here, {theirs:.1f} s with {BASELINE_REF}: {theirs / ours:.2f}x")
    finally:
        remove_checkout(base)
        for rec in (Path(os.environ["PRIME_HOME"]) / "serve").glob("*.json"):  # a server the baseline left
            with contextlib.suppress(OSError, ValueError, KeyError):
                os.kill(int(json.loads(rec.read_text())["pid"]), 15)


if __name__ == "__main__":
    raise SystemExit(main())
