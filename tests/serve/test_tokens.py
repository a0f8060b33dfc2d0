"""vLLM's token route and sampling extras on a real server (its own process) over the embedded tiny
model, untrained: ``/inference/v1/generate`` answers what verifiers' training client
(`renderers.client.generate`) sends and reads, with the model's own log-probabilities, and each
vLLM sampling extra changes the answer on every route that takes it.

Outputs are forced with ``logit_bias`` where a test needs a known text (a +100 bias outweighs the
random model's logits), so nothing here depends on how a model renders chat messages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import torch

from primenb.engine.models import build_byte_tokenizer, build_tiny_model
from primenb.serve import client

pytestmark = pytest.mark.slow  # starts a server process and decodes on the CPU

BASE = "primenb/tiny-byte"
EOS, BOS = 1, 2
A, TILDE = 4 + ord("a"), 4 + ord("~")  # byte tokens: id = 4 + byte
PROMPT = [4 + b for b in b"hello="]
ROUTES = ("chat", "completions", "generate")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.Server]:
    """A server of the base model alone, in a PRIME_HOME of its own (no trained trace is served)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIME_HOME", str(tmp_path_factory.mktemp("tokens-home")))
        s = client.start(base=BASE)
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def model() -> Any:
    return build_tiny_model(BASE, 0).eval()


def root(server: client.Server) -> str:
    return server.url.removesuffix("/v1")


def generate(server: client.Server, token_ids: list[int], timeout: float = 120, **body: Any) -> httpx.Response:
    sampling = body.pop("sampling_params", {})
    doc = {"model": BASE, "token_ids": token_ids, "sampling_params": sampling, **body}
    return httpx.post(f"{root(server)}/inference/v1/generate", json=doc, timeout=timeout)


def forward_logprobs(model: Any, prompt: list[int], completion: list[int]) -> list[float]:
    """The log-probability of each completion token given what precedes it: one plain forward."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return [float(lp[len(prompt) - 1 + i, t]) for i, t in enumerate(completion)]


# -- /inference/v1/generate -----------------------------------------------------------------------


@pytest.mark.parametrize("sampling", [{"temperature": 1.0, "seed": 7}, {"temperature": 0}], ids=["seeded", "greedy"])
def test_generate_answers_token_ids_with_the_models_own_logprobs(
    server: client.Server, model: Any, sampling: dict[str, Any]
) -> None:
    body = {"max_tokens": 12, "logprobs": 1, "stop_token_ids": [EOS], "skip_special_tokens": False, **sampling}
    r = generate(server, PROMPT, sampling_params=body, request_id="r-1", cache_salt="s", priority=0)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["request_id"] == "generate-tokens-r-1" and doc["prompt_token_ids"] == PROMPT
    (choice,) = doc["choices"]
    ids = choice["token_ids"]
    assert 1 <= len(ids) <= 12 and choice["finish_reason"] == ("stop" if ids[-1] == EOS else "length")
    content = choice["logprobs"]["content"]
    assert [e["token"] for e in content] == [f"token_id:{t}" for t in ids]
    assert [e["logprob"] for e in content] == pytest.approx(forward_logprobs(model, PROMPT, ids), abs=1e-4)
    top = [e["top_logprobs"][0] for e in content]  # logprobs: 1 is the most likely token at each step
    assert all(t["logprob"] >= e["logprob"] - 1e-6 for t, e in zip(top, content, strict=True))
    assert doc["usage"] == {"prompt_tokens": len(PROMPT), "completion_tokens": len(ids), "total_tokens": 6 + len(ids)}
    if sampling["temperature"] == 0:
        assert all(t["token"] == e["token"] for t, e in zip(top, content, strict=True))  # greedy: the top token


def test_a_seeded_generate_is_the_same_alone_or_batched(server: client.Server) -> None:
    """Sampling extras keep their state per row: the same ids alone and among 7 other requests."""
    sampling = {"temperature": 1.0, "seed": 11, "max_tokens": 16, "min_p": 0.002, "repetition_penalty": 1.3}
    alone = generate(server, PROMPT, sampling_params=sampling).json()["choices"][0]["token_ids"]

    async def crowd() -> list[list[int]]:
        async with httpx.AsyncClient(timeout=120) as h:

            async def one(prompt: list[int], seed: int) -> list[int]:
                body = {"model": BASE, "token_ids": prompt, "sampling_params": {**sampling, "seed": seed}}
                r = await h.post(f"{root(server)}/inference/v1/generate", json=body)
                return list(r.json()["choices"][0]["token_ids"])

            jobs = [one(PROMPT, 11)] + [one([4 + b for b in f"x{i}=".encode()], i) for i in range(7)]
            return list(await asyncio.gather(*jobs))

    assert asyncio.run(crowd())[0] == alone
    again = generate(server, PROMPT, sampling_params={**sampling, "seed": 12}).json()["choices"][0]["token_ids"]
    assert again != alone  # the seed is what made them equal
    n = generate(server, PROMPT, sampling_params={**sampling, "n": 3}).json()["choices"]
    assert [c["index"] for c in n] == [0, 1, 2] and len({tuple(c["token_ids"]) for c in n}) == 3


@pytest.mark.parametrize(
    ("sampling", "want"),
    [
        ({"logit_bias": {str(EOS): 100}}, [EOS]),  # the end of text is the last id
        ({"logit_bias": {str(EOS): 100}, "min_tokens": 3}, [None, None, None, EOS]),
        ({"logit_bias": {str(A): 100}, "stop_token_ids": [A]}, [A]),
        ({"logit_bias": {str(A): 100}, "stop": ["aa"]}, [A, A]),  # the ids up to the stop string's end
        ({"logit_bias": {str(A): 100}}, [A, A, A, A]),
    ],
)
def test_generate_ends_with_the_token_that_stopped_it(
    server: client.Server, model: Any, sampling: dict[str, Any], want: list[int | None]
) -> None:
    r = generate(server, PROMPT, sampling_params={"max_tokens": 4, "logprobs": 0, **sampling})
    choice = r.json()["choices"][0]
    ids = choice["token_ids"]
    assert len(ids) == len(want) and all(w is None or w == t for w, t in zip(want, ids, strict=True)), ids
    assert choice["finish_reason"] == ("length" if len(want) == 4 and want[-1] == A else "stop")
    got = [e["logprob"] for e in choice["logprobs"]["content"]]
    assert got == pytest.approx(forward_logprobs(model, PROMPT, ids), abs=1e-4)  # the stop token's too
    assert r.json()["usage"]["completion_tokens"] == len(ids)


def test_generate_refuses_what_it_cannot_do_by_name(server: client.Server) -> None:
    cases = [
        ({"token_ids": [5, 999]}, 400, "token_ids", None),  # outside the 260-token vocabulary
        ({"token_ids": [5] * 2048}, 400, "token_ids", "context_length_exceeded"),
        ({"token_ids": [], "sampling_params": {}}, 400, "token_ids", None),
        ({"token_ids": [-1]}, 400, "token_ids[0]", None),
        ({"model": "nope"}, 404, "model", "model_not_found"),
        ({"features": {"mm_hashes": {}}}, 400, "features", "unsupported_parameter"),
        ({"content_parts": [{"type": "image_url", "url": "x"}]}, 400, "content_parts", "unsupported_parameter"),
        ({"stream": True}, 400, "stream", "unsupported_parameter"),
        ({"priority": 3}, 400, "priority", "unsupported_parameter"),
        ({"sampling_params": {"prompt_logprobs": 1}}, 400, "sampling_params.prompt_logprobs", "unsupported_parameter"),
        (
            {"sampling_params": {"structured_outputs": {"json": {}}}},
            400,
            "sampling_params.structured_outputs",
            "unsupported_parameter",
        ),
        ({"sampling_params": {"best_of": 2}}, 400, "sampling_params.best_of", "unsupported_parameter"),
        ({"sampling_params": {"min_tokens": 9, "max_tokens": 4}}, 400, "sampling_params.min_tokens", None),
        ({"sampling_params": {"logprobs": -1}}, 400, "sampling_params.logprobs", None),
        ({"sampling_params": {"temperature": "1"}}, 400, "sampling_params.temperature", None),
        ({"sampling_params": {"logit_bias": {"x": 1}}}, 400, "sampling_params.logit_bias", None),
        ({"sampling_params": {"n": 999}}, 400, "sampling_params.n", None),
        ({"sampling_params": None}, 400, "sampling_params", None),
    ]
    for patch, status, param, code in cases:
        doc = {"model": BASE, "token_ids": PROMPT, "sampling_params": {"max_tokens": 2}, **patch}
        r = httpx.post(f"{root(server)}/inference/v1/generate", json=doc, timeout=60)
        err = r.json()["error"]
        assert (r.status_code, err["param"]) == (status, param), (patch, r.text)
        assert code is None or err["code"] == code, (patch, r.text)
    # vLLM's own way to leave things out: no model (one is served), every off value, the render step's extras
    ok = {
        "token_ids": PROMPT,
        "sampling_params": {"max_tokens": 2, "prompt_logprobs": None, "detokenize": True, "output_kind": 2},
        "features": None,
        "return_token_ids": True,
        "token_offsets": [[0, 1]],
    }
    r = httpx.post(f"{root(server)}/inference/v1/generate", json=ok, timeout=60)
    assert r.status_code == 200 and r.json()["model"] == BASE, r.text


def test_a_generate_whose_client_leaves_is_cancelled(server: client.Server) -> None:
    before = server.stats()
    with pytest.raises(httpx.ReadTimeout):
        generate(server, PROMPT, timeout=0.5, sampling_params={"max_tokens": 2000, "ignore_eos": True})
    end = time.monotonic() + 120  # only catches a hang
    while server.stats()["rows_in_flight"] and time.monotonic() < end:
        time.sleep(0.05)
    after = server.stats()
    assert after["rows_in_flight"] == 0 and after["requests"] == before["requests"] + 1
    assert after["completion_tokens"] - before["completion_tokens"] < 2000  # it ended early


# -- the sampling extras, on each route that takes them -------------------------------------------


def ask(server: client.Server, route: str, prompt: str, **params: Any) -> dict[str, Any]:
    """One request on ``route``; its text (OpenAI routes), ids (the token route), finish reason,
    completion tokens (the stop token not counted) and logprob token names."""
    if route == "generate":
        sampling = {k: v for k, v in params.items() if k != "logprobs"}
        if params.get("logprobs"):
            sampling["logprobs"] = 1
        choice = generate(server, [4 + b for b in prompt.encode()], sampling_params=sampling).json()["choices"][0]
        ids = choice["token_ids"]
        stopped = choice["finish_reason"] == "stop" and not params.get("stop")
        content = (choice["logprobs"] or {}).get("content") or []
        return {"ids": ids, "finish": choice["finish_reason"], "tokens": len(ids) - stopped, "lp": content}
    if route == "chat":
        top = {"top_logprobs": 1} if params.get("logprobs") else {}
        body = {"model": BASE, "messages": [{"role": "user", "content": prompt}], **params, **top}
        doc = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120).json()
        choice = doc["choices"][0]
        text, lp = choice["message"]["content"], (choice["logprobs"] or {}).get("content") or []
    else:
        body = {"model": BASE, "prompt": prompt, **{**params, "logprobs": 1 if params.get("logprobs") else None}}
        doc = httpx.post(f"{server.url}/completions", json=body, timeout=120).json()
        choice = doc["choices"][0]
        text, lp = choice["text"], [{"token": t} for t in (choice["logprobs"] or {}).get("tokens", [])]
    return {"text": text, "finish": choice["finish_reason"], "tokens": doc["usage"]["completion_tokens"], "lp": lp}


@pytest.mark.parametrize("route", ROUTES)
def test_min_tokens_holds_the_end_of_text_back(server: client.Server, route: str) -> None:
    eos = {"logit_bias": {str(EOS): 100}, "max_tokens": 8, "temperature": 0}
    assert ask(server, route, "hi", **eos)["tokens"] == 0
    held = ask(server, route, "hi", **eos, min_tokens=5)
    assert held["tokens"] == 5 and held["finish"] == "stop"


@pytest.mark.parametrize("route", ROUTES)
def test_stop_token_ids_end_a_row(server: client.Server, route: str) -> None:
    forced = {"logit_bias": {str(A): 100}, "max_tokens": 4}
    assert ask(server, route, "hi", **forced)["finish"] == "length"
    stopped = ask(server, route, "hi", **forced, stop_token_ids=[A])
    assert stopped["finish"] == "stop" and stopped["tokens"] == 0
    assert stopped.get("text", "") == ""  # vLLM: a stop token is not part of the text
    held = ask(server, route, "hi", **forced, stop_token_ids=[A], min_tokens=2)  # stop tokens wait too
    assert held["tokens"] == 2 and held["finish"] == "stop"


@pytest.mark.parametrize("route", ROUTES)
def test_min_p_one_keeps_only_the_most_likely_token(server: client.Server, route: str) -> None:
    greedy = ask(server, route, "hello=", temperature=0, max_tokens=12, ignore_eos=True)
    sampled = {"temperature": 1.0, "seed": 5, "max_tokens": 12, "ignore_eos": True}
    assert ask(server, route, "hello=", **sampled) != greedy  # a random model: a sample is not the argmax
    assert ask(server, route, "hello=", **sampled, min_p=1.0) == greedy


@pytest.mark.parametrize("route", ROUTES)
def test_repetition_penalty_divides_what_the_prompt_holds(server: client.Server, route: str) -> None:
    """'a' (+20) is in the prompt, '~' (+15) is not: a penalty of 2 halves 'a' below '~'."""
    bias = {"logit_bias": {str(A): 20, str(TILDE): 15}, "temperature": 0, "max_tokens": 1}
    plain, penalised = ask(server, route, "a", **bias), ask(server, route, "a", **bias, repetition_penalty=2.0)
    if route == "generate":
        assert (plain["ids"], penalised["ids"]) == ([A], [TILDE])
    else:
        assert (plain["text"], penalised["text"]) == ("a", "~")


@pytest.mark.parametrize("route", ROUTES[:2])
def test_include_stop_str_in_output(server: client.Server, route: str) -> None:
    forced = {"logit_bias": {str(A): 100}, "max_tokens": 6}
    assert ask(server, route, "hi", **forced, stop="aa")["text"] == ""
    assert ask(server, route, "hi", **forced, stop="aa", include_stop_str_in_output=True)["text"] == "aa"
    kept = ask(server, route, "hi", **forced, stop_token_ids=[A], include_stop_str_in_output=True)
    assert (kept["text"], kept["finish"]) == ("a", "stop")


@pytest.mark.parametrize("route", ROUTES[:2])
def test_skip_special_tokens_false_keeps_them_in_the_text(server: client.Server, route: str) -> None:
    bos = {"logit_bias": {str(BOS): 100}, "max_tokens": 3}
    assert ask(server, route, "hi", **bos)["text"] == ""  # the default, as vLLM's: left out
    assert ask(server, route, "hi", **bos, skip_special_tokens=False)["text"] == "<bos>" * 3


@pytest.mark.parametrize("route", ROUTES[:2])
def test_return_tokens_as_token_ids_names_logprob_tokens_by_id(server: client.Server, route: str) -> None:
    forced = {"logit_bias": {str(A): 100}, "max_tokens": 2, "logprobs": True}
    assert [e["token"] for e in ask(server, route, "hi", **forced)["lp"]] == ["a", "a"]
    by_id = ask(server, route, "hi", **forced, return_tokens_as_token_ids=True)["lp"]
    assert [e["token"] for e in by_id] == [f"token_id:{A}"] * 2
    if route == "chat":
        assert by_id[0]["top_logprobs"][0]["token"].startswith("token_id:")  # the raw model's top: not 'a'


# -- verifiers' training client -------------------------------------------------------------------


def test_renderers_client_generate_reads_ids_and_logprobs(server: client.Server, model: Any) -> None:
    """`renderers.client.generate` (what verifiers' TrainClient calls each turn) against this server:
    the completion ids it records and their logprobs are the model's own."""
    import openai
    from renderers import DefaultRenderer
    from renderers.client import generate as renderers_generate

    renderer = DefaultRenderer(build_byte_tokenizer())  # prompt_ids given: no chat template needed
    assert renderer.get_stop_token_ids() == [EOS]

    async def turn(seed: int) -> dict[str, Any]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="none", max_retries=0) as c:
            return await renderers_generate(
                client=c,
                renderer=renderer,
                messages=[{"role": "user", "content": "hello"}],
                model=BASE,
                prompt_ids=PROMPT,
                sampling_params={"temperature": 1.0, "max_tokens": 16, "seed": seed},
            )

    out = asyncio.run(turn(3))
    ids = out["completion_ids"]
    assert out["prompt_ids"] == PROMPT and 1 <= len(ids) <= 16
    assert out["completion_logprobs"] == pytest.approx(forward_logprobs(model, PROMPT, ids), abs=1e-4)
    assert out["finish_reason"] == ("stop" if ids[-1] == EOS else "length")
    assert out["request_id"].startswith("generate-tokens-") and out["usage"]["completion_tokens"] == len(ids)
    assert asyncio.run(turn(3))["completion_ids"] == ids  # seeded: the same turn again
