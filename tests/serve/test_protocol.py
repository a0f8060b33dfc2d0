"""The request contract, without a model: every OpenAI field is either honoured, accepted as
metadata, or refused by name; no body whatever makes the server answer 500; and only its own
origin, on its own host, with a JSON content type, reaches a route."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types import completion_create_params
from openai.types.chat import completion_create_params as chat_params

from primenb.serve.generate_protocol import (
    GENERATE_HONOURED,
    GENERATE_METADATA,
    GENERATE_REFUSED,
    SAMPLING_HONOURED,
    SAMPLING_METADATA,
    SAMPLING_REFUSED,
    GenerateRequest,
    GenerateSampling,
)
from primenb.serve.protocol import (
    CHAT_METADATA,
    CHAT_REFUSED,
    VLLM_CHAT_EXTRAS,
    VLLM_EXTRAS,
    ChatRequest,
    CompletionRequest,
)

from .test_units import PORT, URL, app


def _openai_fields(params: Any) -> set[str]:
    return set(params.CompletionCreateParamsBase.__annotations__) | {"stream"}


def test_every_openai_field_is_known() -> None:
    """A field the `openai` package can send is never 'unknown' here: it is honoured, metadata, or
    refused with a reason (this fails when a new openai release adds one)."""
    chat = _openai_fields(chat_params)
    assert chat <= set(ChatRequest.model_fields), chat - set(ChatRequest.model_fields)
    legacy = _openai_fields(completion_create_params)
    assert legacy <= set(CompletionRequest.model_fields), legacy - set(CompletionRequest.model_fields)
    assert set(CHAT_REFUSED) | set(CHAT_METADATA) <= chat


def test_every_field_is_openai_s_or_a_vllm_extra() -> None:
    """Nothing is accepted that neither OpenAI nor vLLM defines (vLLM's extras are honoured on both routes)."""
    for model, params, vllm in (
        (ChatRequest, chat_params, {*VLLM_EXTRAS, *VLLM_CHAT_EXTRAS}),
        (CompletionRequest, completion_create_params, set(VLLM_EXTRAS)),
    ):
        extra = set(model.model_fields) - _openai_fields(params)
        assert extra == vllm, extra ^ vllm


# vLLM's GenerateRequest (vllm/entrypoints/serve/disagg/protocol.py, the release whose answer names
# tokens "token_id:N", which renderers 0.1.12 reads) with the two fields renderers adds for
# process_multimodal=False, and its SamplingParams' input fields (vllm/sampling_params.py)
VLLM_GENERATE = {
    "request_id", "token_ids", "assistant_tokens_mask", "token_offsets", "features", "sampling_params", "model",
    "stream", "stream_options", "cache_salt", "priority", "kv_transfer_params", "ec_transfer_params",
    "content_parts", "return_token_ids",
}  # fmt: skip
VLLM_SAMPLING = {
    "n", "presence_penalty", "frequency_penalty", "repetition_penalty", "temperature", "top_p", "top_k", "min_p",
    "seed", "stop", "stop_token_ids", "ignore_eos", "max_tokens", "min_tokens", "logprobs", "prompt_logprobs",
    "prompt_logprob_token_ids", "prompt_logprob_start", "logprob_token_ids", "flat_logprobs", "detokenize",
    "skip_special_tokens", "spaces_between_special_tokens", "include_stop_str_in_output", "output_kind",
    "stream_interval", "skip_clone", "structured_outputs", "logit_bias", "allowed_token_ids", "extra_args",
    "bad_words", "skip_reading_prefix_cache", "thinking_token_budget", "repetition_detection",
    "routed_experts_prompt_start", "trace_decode_token_ids",
}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "vllm", "groups"),
    [
        (GenerateRequest, VLLM_GENERATE, (GENERATE_HONOURED, GENERATE_METADATA, GENERATE_REFUSED)),
        (GenerateSampling, VLLM_SAMPLING, (SAMPLING_HONOURED, SAMPLING_METADATA, SAMPLING_REFUSED)),
    ],
    ids=["request", "sampling_params"],
)
def test_every_vllm_generate_field_is_in_one_group(model: Any, vllm: set[str], groups: tuple[Any, ...]) -> None:
    """Each of vLLM's fields is honoured, metadata or refused by name, and only these are accepted."""
    honoured, metadata, refused = (set(g) for g in groups)
    assert not (honoured & metadata or honoured & refused or metadata & refused)
    assert vllm <= set(model.model_fields), vllm - set(model.model_fields)
    assert honoured | metadata | refused == set(model.model_fields)


REFUSED_GENERATE = [("", f) for f in GENERATE_REFUSED] + [("sampling_params.", f) for f in SAMPLING_REFUSED]


@pytest.mark.parametrize(("where", "field"), REFUSED_GENERATE, ids=[w + f for w, f in REFUSED_GENERATE])
def test_unhonoured_generate_fields_are_refused_by_name(where: str, field: str) -> None:
    c = app()
    body: dict[str, Any] = {"model": "m", "token_ids": [5, 6], "sampling_params": {"max_tokens": 2}}
    owner = body["sampling_params"] if where else body
    owner[field] = {"x": 1}
    r = c.post("/inference/v1/generate", json=body)
    err = r.json()["error"]
    assert (r.status_code, err["param"], err["code"]) == (400, where + field, "unsupported_parameter"), r.text
    owner[field] = None
    assert c.post("/inference/v1/generate", json=body).status_code == 200  # null: the field is off


def test_generate_answers_vllm_s_shape() -> None:
    r = app().post("/inference/v1/generate", json={"token_ids": [5, 6, 7], "sampling_params": {"logprobs": 1}})
    doc = r.json()
    assert r.status_code == 200 and doc["model"] == "m" and doc["prompt_token_ids"] == [5, 6, 7], r.text
    (choice,) = doc["choices"]
    assert choice["token_ids"] == [7, 6, 5, 1] and choice["finish_reason"] == "stop"  # the stop token last
    assert doc["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert doc["request_id"].startswith("generate-tokens-")


@pytest.mark.parametrize("field", sorted(CHAT_REFUSED))
def test_unhonoured_chat_fields_are_refused_by_name(field: str) -> None:
    c = app()
    body = {"model": "m", "messages": [{"role": "user", "content": "ab"}], field: {"type": "json_object"}}
    r = c.post("/v1/chat/completions", json=body)
    assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text
    off = {**body, field: None}
    assert c.post("/v1/chat/completions", json=off).status_code == 200  # null: the field is off


BAD_BODIES = [
    {"model": "m", "messages": [{"role": "user"}]},
    {"model": "m", "messages": [{"role": "robot", "content": "a"}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "x"}]}]},
    {"model": "m", "messages": [{"role": "tool", "content": "a", "tool_call_id": "1"}]},
    {"model": "m", "messages": []},
    {"model": "m", "messages": [{"role": "user", "content": "a"}], "temperature": 1e300},
    {"model": "m", "messages": [{"role": "user", "content": "a"}], "presence_penalty": 9},
    {"model": "m", "messages": [{"role": "user", "content": "a"}], "top_logprobs": 3},
    {"model": "m", "messages": [{"role": "user", "content": "a"}], "logit_bias": {"abc": 1}},
    {"model": "m", "messages": [{"role": "user", "content": "a"}], "stream_options": {"include_usage": True}},
    {"model": "x" * 100_000, "messages": [{"role": "user", "content": "a"}]},
]


@pytest.mark.parametrize("body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_bad_requests_are_4xx(body: dict[str, Any]) -> None:
    r = app().post("/v1/chat/completions", json=body)
    assert r.status_code in (400, 404) and r.json()["error"]["message"], r.text


@pytest.mark.parametrize(
    "raw",
    [
        b'{"model":"m","prompt":"\\ud800"}',  # a lone surrogate
        b"[" * 100_000 + b"]" * 100_000,  # nesting past any parser's stack
        b'{"model":"m","prompt":"a","temperature":1e-300}',  # greedy, not a division overflow
        b"\xff\xfe{}",
        b"",
    ],
)
def test_hostile_bytes_are_4xx_or_answered(raw: bytes) -> None:
    r = app().post("/v1/completions", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code in (200, 400), r.text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = sorted(set(ChatRequest.model_fields) | set(CompletionRequest.model_fields))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=5), chat=st.booleans())
def test_no_body_makes_a_500(fields: dict[str, Any], chat: bool) -> None:
    """Any mix of known fields with any JSON values: a 4xx naming the problem, or an answer."""
    body = {"model": "m", **({"messages": [{"role": "user", "content": "ab"}]} if chat else {"prompt": "ab"}), **fields}
    raw = json.dumps(body)  # Infinity and NaN written as Python writes them: not JSON, a 400
    path = "/v1/chat/completions" if chat else "/v1/completions"
    r = CLIENT.post(path, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code in (200, 400, 404), (body, r.status_code, r.text)
    if r.status_code != 200:
        assert r.json()["error"]["message"]


CLIENT = app()
SAMPLING_FIELDS = sorted(GenerateSampling.model_fields)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fields=st.dictionaries(st.sampled_from(sorted(GenerateRequest.model_fields)), JSON, max_size=3),
    sampling=st.dictionaries(st.sampled_from(SAMPLING_FIELDS), JSON, max_size=4),
)
def test_no_generate_body_makes_a_500(fields: dict[str, Any], sampling: dict[str, Any]) -> None:
    body = {"model": "m", "token_ids": [5, 6], "sampling_params": sampling, **fields}
    raw = json.dumps(body)
    r = CLIENT.post("/inference/v1/generate", content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code in (200, 400, 404), (body, r.status_code, r.text)
    if r.status_code != 200:
        assert r.json()["error"]["message"]


def test_only_this_server_s_origin_and_host_get_through() -> None:
    c = app()
    body = {"model": "m", "prompt": "ab"}
    assert c.post("/v1/completions", json=body, headers={"Origin": URL}).status_code == 200
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{PORT + 1}", f"https://127.0.0.1:{PORT}"):
        r = c.post("/v1/completions", json=body, headers={"Origin": origin})
        assert r.status_code == 403, origin
    for host in ("evil.example", f"evil.example:{PORT}", f"127.0.0.1.evil:{PORT}", "", f"[::1].evil:{PORT}"):
        assert c.get("/v1/models", headers={"Host": host}).status_code == 403, host  # DNS rebinding
    for host in (f"localhost:{PORT}", f"[::1]:{PORT}", "127.0.0.1:2999"):  # 2999: an SSH forward's port
        assert c.get("/v1/models", headers={"Host": host}).status_code == 200, host
    for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data", ""):
        r = c.post("/admin/shutdown", content=b"{}", headers={"Content-Type": kind})
        assert r.status_code == 415, kind  # what a cross-site form can send
    r = c.get("/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    big = json.dumps({"model": "m", "prompt": "a" * (5 << 20)})
    assert c.post("/v1/completions", content=big, headers={"Content-Type": "application/json"}).status_code == 413


def test_admin_routes_load_only_run_checkpoints(tmp_path: Path) -> None:
    loaded: list[dict[str, Any]] = []

    def load(spec: dict[str, Any]) -> None:
        loaded.append(spec)
        entry = SimpleNamespace(id=spec["id"], kind="adapter", trace=None, root="m", parent="m")
        c.app.state.scheduler.pool.entries[spec["id"]] = entry  # type: ignore[attr-defined]

    c = app(loader=load)
    outside = tmp_path / "somewhere"
    outside.mkdir()
    run = tmp_path / "run"
    ckpt = run / "checkpoints" / "step_3"
    ckpt.mkdir(parents=True)
    (ckpt / "adapter_config.json").write_text("{}")
    for path in (str(outside), "/etc", str(run), str(ckpt / ".." / ".." / ".." / "somewhere")):
        r = c.post("/admin/models", json={"id": "x", "checkpoint": path})
        assert r.status_code in (403, 404), (path, r.text)
    (ckpt.parent / "link").symlink_to(outside)
    assert c.post("/admin/models", json={"id": "x", "checkpoint": str(ckpt.parent / "link")}).status_code == 403
    assert not loaded
    for bad_id in ("x" * 300, "a b", "../x", "x?keep", ""):
        r = c.post("/admin/models", json={"id": bad_id, "checkpoint": str(ckpt)})
        assert r.status_code == 400 and r.json()["error"]["param"] == "id", bad_id
    (run / "status.json").write_text("{}")
    r = c.post("/v1/load_lora_adapter", json={"lora_name": "my-lora", "lora_path": str(ckpt)})
    assert loaded and loaded[-1]["id"] == "my-lora" and loaded[-1]["checkpoint"] == str(ckpt.resolve())
    assert "added successfully" in r.text
    for name, says in (("m", "is a base model, not a LoRA adapter"), ("nope", "cannot be found")):
        r = c.post("/v1/unload_lora_adapter", json={"lora_name": name})  # as vLLM: LoRA adapters only
        error = r.json()["error"]
        assert r.status_code == 404 and says in error["message"] and error["code"] == "model_not_found", name
    r = c.post("/v1/unload_lora_adapter", json={"lora_name": "my-lora"})
    assert r.status_code == 200 and "removed successfully" in r.text
    assert c.get("/health").status_code == 200 and c.get("/version").json()["engine"] == "primenb"
