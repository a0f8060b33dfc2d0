"""Server inputs that answered 500 or stalled (issue 42, round 4), closed where they enter and
generated: ``logit_bias`` keys of any text and ids past the vocabulary, paths with control
characters on every route that takes one, checkpoint notes of every wrong shape, adapter configs
whose module regex backtracks, a prompt format that multiplies the prompt, a request that could
never be queued whole. Each is a 4xx that says why, and the server goes on answering."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.engine.batching import Scheduler
from primenb.engine.serve_errors import ServeError
from primenb.engine.serve_requests import Failed, GenRequest, Sampling
from primenb.engine.serving import ModelPool
from primenb.protocol.checkpoint import CheckpointDir

from .test_batching import BASE, _adapter
from .test_units import app

pytestmark = pytest.mark.slow  # real weights (random, untrained) on the CPU

CHAT = {"model": "m", "messages": [{"role": "user", "content": "ab"}]}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(max_size=12))
def test_logit_bias_keys_of_any_text_are_answered_or_refused(key: str) -> None:
    r = app().post("/v1/chat/completions", json={**CHAT, "logit_bias": {key: 1}})
    ascii_id = key.isascii() and key.isdigit() and len(key) <= 9
    assert r.status_code == (200 if ascii_id else 400), (key, r.text)
    if r.status_code == 400:
        assert r.json()["error"]["param"] == "logit_bias"


def test_logit_bias_is_bounded_in_count() -> None:
    r = app().post("/v1/chat/completions", json={**CHAT, "logit_bias": {str(i): 1 for i in range(2000)}})
    assert r.status_code == 400 and "at most" in r.json()["error"]["message"]


@pytest.mark.parametrize("route", ["/v1/load_lora_adapter", "/admin/models"])
@pytest.mark.parametrize("bad", ["\x00", "\n", "\x1f", "\x7f\x00"])
def test_paths_with_control_characters_are_refused_at_the_edge(route: str, bad: str, tmp_path: Path) -> None:
    path = f"{tmp_path}/run/checkpoints/step_1{bad}x"
    body = {"lora_name": "x", "lora_path": path} if "lora" in route else {"id": "x", "checkpoint": path}
    r = app().post(route, json=body)
    assert r.status_code == 400, r.text


def _collect(scheduler: Scheduler, prompt: Any, *, model: str = BASE, **sampling: Any) -> list[Any]:
    events: list[Any] = []
    done = threading.Event()
    req = GenRequest(model, prompt, Sampling(max_tokens=4, **sampling))

    def emit(event: Any) -> None:
        events.append(event)
        if type(event).__name__ in ("Done", "Failed"):
            done.set()

    req.emit = emit
    scheduler.submit(req)
    assert done.wait(120), "the scheduler never answered"
    return events


def test_logit_bias_ids_past_the_vocabulary_are_a_400() -> None:
    pool = ModelPool(device="cpu")
    pool.add_base(BASE, BASE)
    scheduler = Scheduler(pool).start()
    try:
        vocab = pool.vocab_size(pool.entry(BASE))
        for ids in ([vocab], [vocab + 10**6, 5], [999_999_999]):
            (failed,) = [
                e for e in _collect(scheduler, "ab", logit_bias={i: 1.0 for i in ids}) if isinstance(e, Failed)
            ]
            assert failed.error.status == 400 and failed.error.param == "logit_bias"
        assert not any(isinstance(e, Failed) for e in _collect(scheduler, "ab", logit_bias={vocab - 1: 1.0}))
    finally:
        scheduler.close()


BAD_BASES: list[Any] = [
    "primenb/tiny-byte",
    ["primenb/tiny-byte"],
    7,
    {"name": 5},
    {"name": ""},
    {"name": "primenb/tiny-byte", "seed": -1},
    {"name": "primenb/tiny-byte", "seed": 2**64},
    {"name": "primenb/tiny-byte", "seed": "3"},
    {"name": "primenb/tiny-byte", "seed": True},
    {"name": "primenb/tiny-byte", "seed": 1.5},
    {"name": "primenb/tiny-byte", "path": 3},
    {"name": "primenb/tiny-byte", "path": "a\x00b"},
    {"name": "x" * 5000},
]


@pytest.mark.parametrize("base", BAD_BASES, ids=range(len(BAD_BASES)))
def test_checkpoint_notes_of_any_wrong_shape_are_a_400(base: Any, tmp_path: Path) -> None:
    ckpt = _adapter(tmp_path, "bad", 1)
    (ckpt / CheckpointDir.META).write_text(json.dumps({"base": base}))
    with pytest.raises(ServeError) as refused:
        ModelPool(device="cpu").add_checkpoint("bad", str(ckpt), model_name=BASE)
    assert refused.value.status == 400 and "base" in str(refused.value)


@pytest.mark.parametrize("pattern", ["(.|.)*X", "(a+)+$", "(x*)*y", r"(q)\1", "q" * 2000])
def test_backtracking_module_regexes_are_refused_before_peft_runs_them(pattern: str, tmp_path: Path) -> None:
    ckpt = _adapter(tmp_path, "re", 1)
    config = json.loads((ckpt / CheckpointDir.ADAPTER_CONFIG).read_text())
    (ckpt / CheckpointDir.ADAPTER_CONFIG).write_text(json.dumps({**config, "target_modules": pattern}))
    started = time.monotonic()
    with pytest.raises(ServeError) as refused:
        ModelPool(device="cpu").add_checkpoint("re", str(ckpt), model_name=BASE)
    assert refused.value.status == 400 and "regular expression" in str(refused.value)
    assert time.monotonic() - started < 60  # a hang limit, not a speed target


def test_a_plain_module_regex_still_loads(tmp_path: Path) -> None:
    ckpt = _adapter(tmp_path, "ok", 1)
    config = json.loads((ckpt / CheckpointDir.ADAPTER_CONFIG).read_text())
    (ckpt / CheckpointDir.ADAPTER_CONFIG).write_text(json.dumps({**config, "target_modules": r".*\.(q_proj|v_proj)"}))
    entry = ModelPool(device="cpu").add_checkpoint("ok", str(ckpt), model_name=BASE)
    assert entry.kind == "adapter"


def test_a_prompt_format_repeating_the_prompt_is_bounded_before_it_is_built(tmp_path: Path) -> None:
    from primenb.engine.chat import Conversation

    pool = ModelPool(device="cpu")
    entry = pool.add_checkpoint(
        "rep", str(_adapter(tmp_path, "rep", 1)), model_name=BASE, text_template="{prompt}" * 10_000
    )
    with pytest.raises(ServeError) as refused:
        pool.prompt_ids(entry, Conversation([{"role": "user", "content": "x" * 40_000}]))
    assert refused.value.status == 400 and refused.value.code == "context_length_exceeded"


def test_more_prompts_than_the_queue_holds_is_a_400_not_a_429() -> None:
    c = app()
    c.app.app.state.primenb.scheduler.max_queue = 3  # the guard wraps the Starlette app
    r = c.post("/v1/completions", json={"model": "m", "prompt": ["a", "b", "c", "d"], "max_tokens": 1})
    assert r.status_code == 400 and "max-queue" in r.json()["error"]["message"], r.text


def test_a_model_removed_while_its_request_waited_is_model_not_found() -> None:
    """The scheduler looks its model up again when the request runs (it may have been removed
    meanwhile): that answer has the same 404 and ``model_not_found`` code as the route's own."""
    pool = ModelPool(device="cpu")
    pool.add_base(BASE, BASE)
    scheduler = Scheduler(pool).start()
    try:
        (failed,) = [e for e in _collect(scheduler, "ab", model="gone") if isinstance(e, Failed)]
        assert (failed.error.status, failed.error.param, failed.error.code) == (404, "model", "model_not_found")
        assert "does not exist" in str(failed.error)
    finally:
        scheduler.close()
