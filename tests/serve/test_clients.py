"""The batching server against clients nobody here wrote (LiteLLM, LangChain, the `openai`
package's streaming with logprobs), a client that drops its stream or times out, and evals that
sample like a statistician: distinct rollouts with recorded seeds, an interval over examples,
pass@k, the same samples again from the same seed."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from primenb.serve import client

from .test_serve import ADA, ADB, BASE, FULL

pytestmark = pytest.mark.slow  # trains tiny models and starts server processes


def _rows_in_flight(server: client.Server) -> int:
    return int(server.stats()["rows_in_flight"])


def _wait_idle(server: client.Server, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout  # only catches a hang: an idle server says so at once
    while _rows_in_flight(server) and time.monotonic() < end:
        time.sleep(0.05)
    assert _rows_in_flight(server) == 0, server.stats()


def test_litellm_and_langchain_invoke_and_stream(server: client.Server) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list
    import litellm
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    messages = [{"role": "user", "content": "hello"}]
    kw: dict[str, Any] = {"api_base": server.url, "api_key": "unused", "max_tokens": 8, "temperature": 0}
    plain = litellm.completion(model=f"openai/{ADA}", messages=messages, **kw)
    text = plain.choices[0].message.content
    streamed = litellm.completion(model=f"openai/{ADA}", messages=messages, stream=True, **kw)
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == text

    chat = ChatOpenAI(model=ADA, base_url=server.url, api_key="unused", max_tokens=8, temperature=0)
    assert chat.invoke("hello").content == text
    assert "".join(str(c.content) for c in chat.stream("hello")) == text

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    # an adapter that never learnt to call tools answers in text: its reply is not parsed into a call
    reply = chat.bind_tools([add]).invoke("what is 2 + 3?")
    assert (
        reply.tool_calls == []
        and isinstance(reply.content, str)
        and reply.response_metadata["finish_reason"] != "tool_calls"
    )


def test_openai_streams_logprobs_and_sampled_requests_are_independent(server: client.Server) -> None:
    c = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    chunks = list(
        c.chat.completions.create(
            model=ADB,
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=6,
            temperature=0,
            logprobs=True,
            top_logprobs=2,
            stream=True,
        )
    )
    entries = [e for ch in chunks if ch.choices and ch.choices[0].logprobs for e in ch.choices[0].logprobs.content]
    assert 0 < len(entries) <= 6 and all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in entries)
    assert all(e.logprob == pytest.approx(e.top_logprobs[0].logprob) for e in entries)  # greedy: the top one
    legacy = c.completions.create(model=ADB, prompt="hello=", max_tokens=4, temperature=0, logprobs=2)
    assert legacy.choices[0].logprobs is not None and len(legacy.choices[0].logprobs.tokens) <= 4

    def sample(seed: int | None) -> str:
        r = c.completions.create(model=ADA, prompt="hello=", max_tokens=12, temperature=1.0, seed=seed)
        return r.choices[0].text

    seedless = [sample(None) for _ in range(6)]
    assert len(set(seedless)) >= 5, seedless  # each request draws afresh

    async def crowd() -> list[str]:  # the same seeded request, among 11 others
        ac = openai.AsyncOpenAI(base_url=server.url, api_key="unused", max_retries=0)
        jobs = [ac.completions.create(model=ADA, prompt="hello=", max_tokens=12, temperature=1.0, seed=7)]
        jobs += [
            ac.completions.create(model=m, prompt=p, max_tokens=12, temperature=1.0)
            for m in (ADB, BASE, FULL)
            for p in ("abc=", "x=", "longer prompt=", "hi=")
        ]
        out = await asyncio.gather(*jobs)
        await ac.close()
        return [r.choices[0].text for r in out]

    assert asyncio.run(crowd())[0] == sample(7)


def test_a_dropped_stream_and_a_client_timeout_free_their_rows(server: client.Server) -> None:
    _wait_idle(server)
    before = server.stats()
    body = {"model": ADA, "prompt": "hello=", "max_tokens": 1900, "stream": True, "ignore_eos": True}
    with httpx.Client(timeout=60) as h, h.stream("POST", f"{server.url}/completions", json=body) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                break  # one chunk, then the client hangs up
    _wait_idle(server)  # the rows left: nothing decodes for nobody
    slow = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0, timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        slow.completions.create(model=ADA, prompt="hello=", max_tokens=1900, extra_body={"ignore_eos": True})
    _wait_idle(server)
    after = server.stats()
    assert after["requests"] - before["requests"] == 2
    assert after["completion_tokens"] - before["completion_tokens"] < 1900  # both ended early
    c = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    assert c.completions.create(model=ADB, prompt="x=", max_tokens=4, temperature=0).usage.completion_tokens <= 4


def test_eval_rollouts_are_independent_seeded_and_summarised_over_examples(server: client.Server, traces: Any) -> None:
    from primenb.serve.evaluate import evaluate

    kw: dict[str, Any] = {"num_examples": 4, "rollouts": 3, "temperature": 1.0, "store": False, "seed": 5}
    result = evaluate(["ada"], "reverse-text", **kw)
    assert result.baseline == BASE  # one trace alone: compared with the model it was trained on
    assert list(result.table["role"]) == ["baseline", "model"]
    mine = result.samples[result.samples["model"] == ADA]
    assert len(mine) == 12 and mine["seed"].nunique() == 12
    distinct = mine.groupby("example")["completion"].nunique()
    assert (distinct >= 2).all(), distinct  # three samples of one prompt, not one sample thrice
    row = result.table.set_index("model").loc[ADA]
    means = mine.groupby("example")["reward"].mean()
    assert row["reward_mean"] == pytest.approx(means.mean())
    half = 1.96 * means.std(ddof=1) / len(means) ** 0.5
    assert row["ci95_high"] - row["reward_mean"] == pytest.approx(half)  # over the 4 examples, not 12 rows
    assert {"pass@1", "pass@2", "pass@3"} <= set(result.table.columns)
    assert row["pass@1"] <= row["pass@2"] <= row["pass@3"]
    # measured speeds to a meaningful digit (issue 45: 17-digit floats in the table)
    assert row["tokens_per_s"] == round(row["tokens_per_s"], 1) and row["wall_s"] == round(row["wall_s"], 2)
    again = evaluate(["ada"], "reverse-text", **kw)
    assert list(again.samples["completion"]) == list(result.samples["completion"])  # reproducible


def test_an_eval_stops_the_server_it_started_unless_asked_to_keep_it(server: client.Server) -> None:
    from primenb.serve.evaluate import evaluate

    other = "primenb/tiny-byte-s"  # a base the session's server does not serve: the eval starts one
    before = {s.pid for s in client.servers()}
    result = evaluate([other], "reverse-text", num_examples=2, max_tokens=4, store=False)
    assert "and stopped it" in repr(result)
    assert {s.pid for s in client.servers()} == before
    kept = evaluate([other], "reverse-text", num_examples=2, max_tokens=4, store=False, keep_server=True)
    new = [s for s in client.servers() if s.pid not in before]
    try:
        assert "and kept it" in repr(kept) and len(new) == 1 and other in new[0].models
    finally:
        for s in new:
            s.stop()
    assert {s.pid for s in client.servers()} == before
    end = time.monotonic() + 120  # the starter's thread reaps it: gone, not a zombie
    while any(Path(f"/proc/{s.pid}").exists() for s in new) and time.monotonic() < end:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{s.pid}").exists() for s in new)
