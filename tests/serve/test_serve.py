"""The server against real clients: the `openai` package (its own types parse every answer), the
`prime` CLI 0.18.0, concurrency across adapters, runtime add/remove, bad input, and the eval."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from primenb.backends.primecli import find_prime
from primenb.serve import client

pytestmark = pytest.mark.slow  # trains tiny models and starts server processes

BASE = "primenb/tiny-byte"
ADA, ADB = (f"{BASE}-adapter-{n}" for n in ("ada", "adb"))
FULL = f"{BASE}-ft-full"  # a full fine-tune is not an adapter


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def greedy(c: openai.OpenAI, model: str, prompt: str, n: int = 12) -> str:
    r = c.completions.create(model=model, prompt=prompt, max_tokens=n, temperature=0)
    return r.choices[0].text


def test_models_chat_completions_and_streaming_with_openai(server: client.Server) -> None:
    c = openai.OpenAI(base_url=server.url, api_key="unused")
    ids = [m.id for m in c.models.list()]
    assert ids[0] == BASE and {ADA, ADB, FULL} <= set(ids)
    assert c.models.retrieve(ADA).id == ADA
    chat = c.chat.completions.create(
        model=ADA,
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=8,
        temperature=0.7,
        top_p=0.9,
        seed=3,
        n=2,
    )
    assert len(chat.choices) == 2 and chat.usage is not None and chat.usage.completion_tokens <= 16
    again = c.chat.completions.create(
        model=ADA,
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=8,
        temperature=0.7,
        top_p=0.9,
        seed=3,
        n=2,
    )
    assert [x.message.content for x in again.choices] == [x.message.content for x in chat.choices]  # seed repeats
    text = greedy(c, ADA, "hello=", 16)
    streamed = c.completions.create(model=ADA, prompt="hello=", max_tokens=16, temperature=0, stream=True)
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == text
    chunks = list(
        c.chat.completions.create(
            model=ADA, messages=[{"role": "user", "content": "hello"}], max_tokens=16, temperature=0, stream=True
        )
    )
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks) == text  # chat = the env's prompt format
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    if len(text) > 2:  # stop strings cut the text before them
        stop = text[1:3]
        assert greedy_stop(c, ADA, stop) == text[: text.find(stop)]


def greedy_stop(c: openai.OpenAI, model: str, stop: str) -> str:
    return c.completions.create(model=model, prompt="hello=", max_tokens=16, temperature=0, stop=[stop]).choices[0].text


def test_adapters_differ_and_32_concurrent_requests_never_mix(server: client.Server) -> None:
    c = openai.OpenAI(base_url=server.url, api_key="unused")
    prompts = ["abcde=", "hello=", "serving=", "primenb="]
    want = {(m, p): greedy(c, m, p) for m in (ADA, ADB, BASE) for p in prompts}
    assert any(want[(ADA, p)] != want[(ADB, p)] for p in prompts), "two adapters trained differently answer alike"

    async def many() -> list[tuple[str, str, str]]:
        ac = openai.AsyncOpenAI(base_url=server.url, api_key="unused", max_retries=0)
        jobs = [((ADA, ADB, BASE)[i % 3], prompts[i % 4]) for i in range(32)]

        async def one(m: str, p: str) -> tuple[str, str, str]:
            r = await ac.completions.create(model=m, prompt=p, max_tokens=12, temperature=0)
            return m, p, r.choices[0].text

        out = await asyncio.gather(*(one(m, p) for m, p in jobs))
        await ac.close()
        return out

    answers = asyncio.run(many())
    assert len(answers) == 32
    assert all(text == want[(m, p)] for m, p, text in answers)


def test_prime_cli_lists_and_chats_with_the_adapter(server: client.Server, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = dict(os.environ, HOME=str(tmp_path / "home"), PRIME_API_KEY="unused", PRIME_INFERENCE_URL=server.url)
    prime = find_prime()  # beside this Python: `make test` runs the venv's python without the venv on PATH
    assert prime, "the prime CLI (test extra) is not installed"
    listed = subprocess.run(
        [prime, "inference", "models", "-o", "json"], capture_output=True, text=True, env=env, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    assert {ADA, ADB, FULL} <= {m["id"] for m in json.loads(listed.stdout)["data"]}
    chat = subprocess.run(
        [prime, "inference", "chat", ADA, "hello", "--max-tokens", "12"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert chat.returncode == 0, chat.stderr
    c = openai.OpenAI(base_url=server.url, api_key="unused")
    want = c.chat.completions.create(model=ADA, messages=[{"role": "user", "content": "hello"}], max_tokens=12).choices
    assert chat.stdout.strip() and want


def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(server: client.Server, traces: Any) -> None:
    url = server.url
    c = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    status, body = _post(f"{url}/chat/completions", b"{not json")
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    status, body = _post(f"{url}/chat/completions", json.dumps({"model": ADA}).encode())
    assert status == 400 and body["error"]["param"] == "messages"
    status, body = _post(f"{url}/completions", json.dumps({"model": ADA, "prompt": "a", "temperature": "hot"}).encode())
    assert status == 400 and body["error"]["param"] == "temperature"
    huge = c.completions.create(model=ADA, prompt="x" * 2040 + "=", max_tokens=10**9, temperature=0)
    assert huge.usage is not None and huge.usage.completion_tokens <= 2048 - 2041  # clamped to the context left
    with pytest.raises(openai.BadRequestError, match="maximum context length is 2048"):
        c.completions.create(model=ADA, prompt="x" * 5000, max_tokens=4)
    with pytest.raises(client.ServeError, match="not a folder"):  # a deleted checkpoint dir
        client._admin(server, "POST", "/admin/models", {"id": "gone", "checkpoint": str(Path(url).parent / "nowhere")})
    assert greedy(c, ADA, "hello=")  # still serving


def test_add_and_remove_at_runtime(server: client.Server, traces: Any, tmp_path: Path) -> None:
    assert client.remove("adb", server=server) == ADB
    c = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    assert ADB not in [m.id for m in c.models.list()]
    with pytest.raises(openai.NotFoundError):
        greedy(c, ADB, "hello=")
    assert client.add("adb", server=server) == [ADB]
    with pytest.raises(client.ServeError, match="already serves"):
        client.add("adb", server=server)
    assert ADB in [m.id for m in c.models.list()] and greedy(c, ADA, "hello=")
    frame = client.table()
    row = frame[frame["url"] == server.url].iloc[0]
    assert row["pid"] == server.pid and ADB in row["models"] and row["requests"] > 0
    # a copy of a trace whose checkpoint was deleted: a clear error, nothing changes
    copy = tmp_path / "copy"
    shutil.copytree(traces["adb"].dir, copy)
    doc = json.loads((copy / "trace.json").read_text())
    doc["final"]["path"] = str(copy / "checkpoints" / Path(doc["final"]["path"]).name)
    doc["trace_id"] = "0bad" + doc["trace_id"][4:]  # another trace, not the one served
    (copy / "trace.json").write_text(json.dumps(doc))
    shutil.rmtree(copy / "checkpoints")
    with pytest.raises(Exception, match="no checkpoint"):
        client.add(str(copy), server=server)
    assert set(server.refresh().models) >= {ADA, ADB}


def test_refusals_port_in_use_key_and_stopping(serve_home: Path) -> None:
    with pytest.raises(client.ServeError, match="--api-key-var"):
        client.start(base=BASE, host="0.0.0.0")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        with pytest.raises(client.ServeError, match="cannot listen"):
            client.start(base=BASE, port=busy.getsockname()[1])
    os.environ["PRIMENB_TEST_KEY"] = "s3cret"
    try:
        s = client.start(base=BASE, api_key_var="PRIMENB_TEST_KEY")
        try:
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=s.url, api_key="wrong", max_retries=0).models.list()
            good = openai.OpenAI(base_url=s.url, api_key="s3cret", max_retries=0)
            assert BASE in [m.id for m in good.models.list()]
            client._admin(s, "POST", "/admin/shutdown", {})
            with pytest.raises(openai.APIStatusError) as exc:  # a clear 503 while it stops
                good.models.list()
            assert exc.value.status_code == 503 and "stopping" in exc.value.message
        finally:
            s.stop()
    finally:
        del os.environ["PRIMENB_TEST_KEY"]


def test_eval_of_the_default_matches_its_final_eval(server: client.Server, traces: Any) -> None:
    from primenb.serve.evaluate import evaluate

    full = traces["full"]
    final = full.metrics["eval/reverse-text/reward"].dropna().iloc[-1]
    result = evaluate(["full", BASE], "reverse-text", num_examples=12)
    row = result.table.set_index("model").loc[FULL]
    assert row["reward_mean"] == pytest.approx(final, abs=1e-9)
    assert row["n"] == 12 and "reward/lcs" in result.table.columns and len(result.samples) == 24
    stored = json.loads((Path(full.dir) / "evals" / "reverse-text.json").read_text())
    assert stored["summary"]["reward_mean"] == pytest.approx(final, abs=1e-9) and len(stored["samples"]) == 12
    (_, svg), *_ = result.chart().charts  # the models side by side, one bar each
    assert svg.count('class="primenb-bar"') == len(result.table)


def test_a_stored_eval_records_how_it_was_taken_and_its_baseline(server: client.Server, traces: Any) -> None:
    """Two stored evals of one model may differ only where the file says why: the seed, the pass
    threshold, -n, -r, the token budget; the baseline it was compared against keeps its samples
    as the candidate does; `primenb eval --json` prints all of it, samples included."""
    import sys

    from primenb.serve.evaluate import evaluate

    ada = traces["ada"]
    result = evaluate(["ada"], "reverse-text", num_examples=3, rollouts=2, seed=5, pass_reward=0.5, max_tokens=8)
    stored = json.loads((Path(ada.dir) / "evals" / "reverse-text.json").read_text())
    taken = {k: stored[k] for k in ("seed", "pass_reward", "num_examples", "rollouts", "max_tokens", "temperature")}
    assert taken == {"seed": 5, "pass_reward": 0.5, "num_examples": 3, "rollouts": 2, "max_tokens": 8, "temperature": 0}
    assert stored["baseline"]["model"] == result.baseline == BASE
    assert len(stored["baseline"]["samples"]) == len(stored["samples"]) == 6
    assert stored["baseline"]["summary"]["max_tokens"] == 8

    cmd = [sys.executable, "-m", "primenb.cli", "eval", "ada", "--env", "reverse-text", "-n", "2", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["seed"] == 0 and doc["pass_reward"] == 1.0 and doc["baseline"] == BASE
    assert [r["model"] for r in doc["summary"]] == [BASE, doc["summary"][1]["model"]]
    assert len(doc["samples"]) == 4 and {"completion", "reward"} <= set(doc["samples"][0])

    # removing what it does not serve: the message lists what it serves
    with pytest.raises(client.ServeError, match=r"does not serve 'nope' .*; it serves: .*primenb/tiny-byte"):
        client.remove("nope")


def test_four_adapters_share_one_base(server: client.Server, traces: Any) -> None:
    from primenb.engine.models import resolve_checkpoint

    ckpt = resolve_checkpoint(Path(traces["ada"].dir) / "checkpoints")
    adapter = (ckpt / "adapter_model.safetensors").stat().st_size
    before = client._admin(server, "GET", "/admin/stats")
    ids = [f"mem-{i}" for i in range(4)]
    try:
        for i in ids:
            client._admin(server, "POST", "/admin/models", {"id": i, "checkpoint": str(ckpt), "model_name": BASE})
        after = client._admin(server, "GET", "/admin/stats")
        grown = after["weight_bytes"] - before["weight_bytes"]
        assert 0 < grown <= 1.25 * 4 * adapter  # adapters only: the base is not copied
        assert after["rss_bytes"] - before["rss_bytes"] < 64 * 2**20
        c = openai.OpenAI(base_url=server.url, api_key="unused")
        assert greedy(c, "mem-3", "hello=") == greedy(c, ADA, "hello=")  # the same weights answer alike
    finally:
        for i in ids:
            client._admin(server, "DELETE", f"/admin/models/{i}")
