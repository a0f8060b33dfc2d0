"""verifiers' own training client, unchanged, driving a real server (its own process) over the
embedded tiny model, untrained: `verifiers.v1.clients.train.TrainClient` renders each turn with the
`renderers` package (its template fallback, `DefaultRenderer`, over the byte tokenizer's chat
template) and POSTs the ids to ``/inference/v1/generate``; the turns go through verifiers' message
graph as its interception server drives them (`graph.prepare_turn` → `get_response` →
`turn.commit`), so the trace at the end is what prime-rl would train on.

The random-init model's replies are forced onto a few ASCII letters with ``logit_bias`` (a +100
bias outweighs its logits; the logprobs stay the model's own): its unforced bytes are mostly not
UTF-8, and a renderer that re-renders the conversation (the template fallback has no bridge) writes
the reply's text, whose U+FFFD are other bytes than the sampled ones."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from primenb.engine.chat import ChatRenderer, Conversation
from primenb.engine.models import build_byte_tokenizer, build_tiny_model
from primenb.serve import client

pytestmark = pytest.mark.slow  # starts a server process and decodes on the CPU

BASE = "primenb/tiny-byte"
EOS = 1
LETTERS = {str(4 + b): 100 for b in b"abcde"}  # byte tokens: id = 4 + byte
ROUTE = "/inference/v1/generate"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.Server]:
    """A server of the base model alone, in a PRIME_HOME of its own; nothing reaches the hub."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIME_HOME", str(tmp_path_factory.mktemp("trainclient-home")))
        mp.setenv("HF_HUB_OFFLINE", "1")
        s = client.start(base=BASE)
        try:
            yield s
        finally:
            s.stop()


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The served model's tokenizer (with its chat template) where `renderers.base.load_tokenizer`
    loads it from: a local folder, as prime-rl pins `renderer_model_name` to the base model."""
    folder = tmp_path_factory.mktemp("tiny-byte-tokenizer")
    build_byte_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model() -> Any:
    return build_tiny_model(BASE, 0).eval()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies the client POSTs to the token route, as they leave it (an httpx event hook on the
    client verifiers builds; the client itself is unchanged)."""
    from verifiers.v1.clients import base

    bodies: list[dict[str, Any]] = []
    build = base.build_async_httpx

    async def record(request: httpx.Request) -> None:
        if request.url.path == ROUTE:
            bodies.append(json.loads(request.content))

    def build_recording(config: Any) -> httpx.AsyncClient:
        http = build(config)
        http.event_hooks["request"].append(record)
        return http

    monkeypatch.setattr(base, "build_async_httpx", build_recording)
    return bodies


def episode(
    server: client.Server, folder: Path, sampling: dict[str, Any], user_turns: list[str]
) -> tuple[list[list[dict[str, Any]]], list[Any], Any]:
    """One conversation through TrainClient, a turn per user message, as verifiers' interception
    server runs it: the harness's chat request is parsed by the chat dialect, resolved against the
    trace's message graph, answered by the client and committed. Returns each turn's messages, each
    turn's `Response`, and the trace."""
    import verifiers.v1 as vf
    from renderers import DefaultRendererConfig
    from verifiers.v1 import graph
    from verifiers.v1.clients.train import TrainClient
    from verifiers.v1.configs.client import TrainClientConfig
    from verifiers.v1.dialects.chat import ChatDialect
    from verifiers.v1.trace import AgentInfo, Trace, TraceTask
    from verifiers.v1.types import SamplingConfig

    config = TrainClientConfig(
        base_url=server.url,
        api_key_var="PRIMENB_TEST_NO_KEY",  # not PRIME_API_KEY: no Prime CLI config is read
        renderer=DefaultRendererConfig(),
        renderer_model_name=str(folder),
    )

    async def run() -> tuple[list[list[dict[str, Any]]], list[Any], Any]:
        train = TrainClient(config)
        dialect = ChatDialect()
        trace = Trace(task=TraceTask(type="Chat", data={}), agent=AgentInfo(config=vf.AgentConfig()))
        prompts: list[list[dict[str, Any]]] = []
        responses: list[Any] = []
        messages: list[dict[str, Any]] = []
        try:
            for text in user_turns:
                messages = [*messages, {"role": "user", "content": text}]
                body = {"model": BASE, "messages": messages}
                request = dialect.parse_request(body)
                turn = graph.prepare_turn(trace, request.messages, request.tools)
                response = await train.get_response(
                    dialect, body, SamplingConfig(**sampling), session_id=trace.id, turn=turn
                )
                turn.commit(response)
                prompts.append(messages)
                responses.append(response)
                messages = [*messages, response.raw["choices"][0]["message"]]  # what the harness sends back
        finally:
            await train.close()
        return prompts, responses, trace

    return asyncio.run(run())


def forward_logprobs(model: Any, prompt: list[int], completion: list[int]) -> tuple[list[float], list[int]]:
    """Each completion token's log-probability given what precedes it, and the most likely token at
    each of those steps: one plain forward of prompt + completion."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    steps = range(len(prompt) - 1, len(prompt) - 1 + len(completion))
    return [float(lp[s, t]) for s, t in zip(steps, completion, strict=True)], [int(lp[s].argmax()) for s in steps]


def test_a_two_turn_episode_records_the_renderers_prompts_and_the_models_logprobs(
    server: client.Server, tokenizer_folder: Path, model: Any, sent: list[dict[str, Any]]
) -> None:
    from renderers import DefaultRenderer, DefaultRendererConfig, create_renderer
    from renderers.base import load_tokenizer

    sampling = {"temperature": 1.0, "max_tokens": 12, "seed": 5, "logit_bias": LETTERS}
    prompts, responses, trace = episode(server, tokenizer_folder, sampling, ["hello", "and again?"])

    renderer = create_renderer(load_tokenizer(str(tokenizer_folder)), DefaultRendererConfig())
    assert isinstance(renderer, DefaultRenderer) and renderer.get_stop_token_ids() == [EOS]
    ours = ChatRenderer(build_byte_tokenizer())
    assert len(sent) == len(responses) == 2
    for messages, response, body in zip(prompts, responses, sent, strict=True):
        tokens = response.tokens
        # the prompt is what renderers and primenb's own renderer give for these messages
        expected = renderer.render(messages, add_generation_prompt=True).token_ids
        assert tokens.prompt_ids == expected == ours.render(Conversation(messages))
        assert body["token_ids"] == tokens.prompt_ids and body["model"] == BASE
        # the sampling settings went out as the episode set them, with the renderer's stop ids
        sp = body["sampling_params"]
        assert {k: sp[k] for k in sampling} == sampling
        assert sp["stop_token_ids"] == [EOS] and sp["logprobs"] == 1 and sp["skip_special_tokens"] is False
        # ... and were honoured: max_tokens letters (nothing else can be drawn, not even the end)
        ids = tokens.completion_ids
        assert len(ids) == 12 and response.finish_reason == "length"
        assert set(ids) <= {int(t) for t in LETTERS}
        assert response.message.content == bytes(t - 4 for t in ids).decode()
        # the recorded logprobs are the model's own (raw logits, before the bias)
        logprobs, _ = forward_logprobs(model, tokens.prompt_ids, ids)
        assert tokens.completion_logprobs == pytest.approx(logprobs, abs=1e-4)
        assert response.usage.prompt_tokens == len(tokens.prompt_ids)

    first, second = (r.tokens for r in responses)
    # the second turn's prompt continues the first turn exactly as sampled (the reply re-renders to
    # the same ids, then the template closes it with <eos> and opens the next user turn)
    assert second.prompt_ids[: len(first.prompt_ids) + len(first.completion_ids)] == (
        first.prompt_ids + first.completion_ids
    )
    assert second.prompt_ids[len(first.prompt_ids) + len(first.completion_ids)] == EOS
    # what prime-rl trains on: one branch, the last turn's prompt + completion, and exactly the
    # sampled tokens trainable, with the logprobs the server returned
    (branch,) = trace.branches
    assert branch.token_ids == second.prompt_ids + second.completion_ids
    mask = branch.sampled_mask
    assert [t for t, m in zip(branch.token_ids, mask, strict=True) if m] == first.completion_ids + second.completion_ids
    trained = [lp for lp, m in zip(branch.logprobs, mask, strict=True) if m]
    assert trained == first.completion_logprobs + second.completion_logprobs


def test_trainclient_sampling_settings_are_honoured(
    server: client.Server, tokenizer_folder: Path, model: Any, sent: list[dict[str, Any]]
) -> None:
    """Temperature 0 is greedy (each token the model's most likely) and 1 samples, a seed gives the
    same reply again and another seed another one, and max_tokens bounds the reply."""

    def reply(**sampling: Any) -> Any:
        (_,), (response,), _ = episode(server, tokenizer_folder, sampling, ["hello"])
        return response

    greedy = reply(temperature=0.0, max_tokens=8)
    _, most_likely = forward_logprobs(model, greedy.tokens.prompt_ids, greedy.tokens.completion_ids)
    assert greedy.tokens.completion_ids == most_likely and 1 <= len(most_likely) <= 8
    assert greedy.finish_reason == ("stop" if most_likely[-1] == EOS else "length")

    seeded = reply(temperature=1.0, max_tokens=10, seed=11)
    assert seeded.tokens.completion_ids == reply(temperature=1.0, max_tokens=10, seed=11).tokens.completion_ids
    assert seeded.tokens.completion_ids != reply(temperature=1.0, max_tokens=10, seed=12).tokens.completion_ids
    assert 1 <= len(seeded.tokens.completion_ids) <= 10
    _, seeded_most_likely = forward_logprobs(model, seeded.tokens.prompt_ids, seeded.tokens.completion_ids)
    assert seeded.tokens.completion_ids != seeded_most_likely  # temperature 1 samples
    assert [b["sampling_params"].get("seed") for b in sent] == [None, 11, 11, 12]
    assert [b["sampling_params"]["temperature"] for b in sent] == [0.0, 1.0, 1.0, 1.0]
