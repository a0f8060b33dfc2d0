"""A request that sets no sampling field gets the engine's `Sampling` defaults on every route: the
HTTP schemas read them from `DEFAULT_SAMPLING` instead of spelling them again."""

from __future__ import annotations

import dataclasses

from primenb.engine.serve_requests import DEFAULT_SAMPLING
from primenb.serve.generate_protocol import GenerateSampling
from primenb.serve.protocol import ChatRequest, CompletionRequest

ROUTE_SET = {"max_tokens", "logprobs", "top_logprobs", "echo", "tokens_as_ids"}  # each route decides these


def _defaults_but_route_set(sampling: object) -> dict[str, object]:
    fields = dataclasses.asdict(sampling)  # type: ignore[call-overload]
    return {k: v for k, v in fields.items() if k not in ROUTE_SET}


def test_the_token_route_schema_defaults_are_the_engine_s() -> None:
    shared = {f.name for f in dataclasses.fields(DEFAULT_SAMPLING)} & set(GenerateSampling.model_fields)
    spelled = {n for n in shared - ROUTE_SET if GenerateSampling.model_fields[n].default is not None}
    assert len(spelled) >= 10  # None: unset, the engine's default applies (the test below)
    for name in spelled:
        assert GenerateSampling.model_fields[name].default == getattr(DEFAULT_SAMPLING, name), name


def test_a_request_that_sets_nothing_samples_with_the_engine_defaults() -> None:
    want = _defaults_but_route_set(DEFAULT_SAMPLING)
    chat = ChatRequest.model_validate({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    text = CompletionRequest.model_validate({"model": "m", "prompt": "hi"})
    tokens = GenerateSampling.model_validate({})
    for sampling in (chat.sampling(), text.sampling(), tokens.sampling()):
        assert _defaults_but_route_set(sampling) == want
