"""vLLM's adapter routes against the real server: an adapter loaded at run time is served as
``primenb serve`` serves its trace (prompt format, parent, trace), an imported trace's format is
read as plain data (its code never runs), and unloading removes LoRA adapters only."""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from primenb.engine.models import resolve_checkpoint
from primenb.serve import client

pytestmark = pytest.mark.slow  # trains tiny models and starts a server

BASE = "primenb/tiny-byte"
ADA, ADB = (f"{BASE}-adapter-{n}" for n in ("ada", "adb"))
FULL = f"{BASE}-ft-full"


def _post(server: client.Server, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    root = server.url.rsplit("/v1", 1)[0]
    req = urllib.request.Request(
        root + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if resp.headers.get_content_type() == "application/json" else raw
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _chat(server: client.Server, model: str, text: str = "hello") -> str:
    c = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    messages = [{"role": "user", "content": text}]
    r = c.chat.completions.create(model=model, messages=messages, max_tokens=16, temperature=0)  # type: ignore[arg-type]
    return r.choices[0].message.content or ""


def _card(server: client.Server, model: str) -> dict[str, Any]:
    return next(c for c in server.cards() if c["id"] == model)


def _checkpoint(run: Any) -> str:
    return str(resolve_checkpoint(Path(run.dir) / "checkpoints"))


def test_a_loaded_adapter_answers_and_is_described_as_when_served_from_the_start(
    server: client.Server, traces: Any
) -> None:
    ckpt = _checkpoint(traces["ada"])
    status, _ = _post(server, "/v1/load_lora_adapter", {"lora_name": "ada-rt", "lora_path": ckpt})
    assert status == 200
    status, added = _post(server, "/admin/models", {"id": "ada-admin", "checkpoint": ckpt})
    assert status == 201
    try:
        want = _card(server, ADA)
        assert want["primenb"]["prompt_format"] == "text_template" and want["parent"] == BASE
        for loaded in (_card(server, "ada-rt"), added):
            assert loaded["parent"] == want["parent"] and loaded["root"] == want["root"]
            assert loaded["primenb"] == want["primenb"]  # kind, trace, stage, prompt format
        for text in ("hello", "abcde", "serving"):  # the trace's prompt format: the same rendered tokens
            assert _chat(server, "ada-rt", text) == _chat(server, "ada-admin", text) == _chat(server, ADA, text)
        # what the request says wins over the trace
        status, own = _post(server, "/admin/models", {"id": "ada-own", "checkpoint": ckpt, "parent": FULL})
        assert status == 201 and own["parent"] == FULL
    finally:
        for name in ("ada-rt", "ada-admin", "ada-own"):
            client._admin(server, "DELETE", f"/admin/models/{name}") if name in server.refresh().models else None


def test_the_parent_is_the_trace_s_warm_up_when_it_is_served(server: client.Server, traces: Any) -> None:
    ada = traces["ada"]
    trace_id = json.loads((Path(ada.dir) / "trace.json").read_text())["trace_id"]
    warm = {"id": "ada-warm", "checkpoint": _checkpoint(traces["full"]), "trace": trace_id, "stage": "sft_warmup"}
    assert _post(server, "/admin/models", warm)[0] == 201  # stands in for the run's SFT warm-up
    try:
        assert _post(server, "/v1/load_lora_adapter", {"lora_name": "ada-rt", "lora_path": _checkpoint(ada)})[0] == 200
        assert _card(server, "ada-rt")["parent"] == "ada-warm"
    finally:
        for name in ("ada-rt", "ada-warm"):
            client._admin(server, "DELETE", f"/admin/models/{name}")


@pytest.mark.parametrize("imported", [True, False], ids=["imported", "copied-in-unmarked"])
def test_a_loaded_trace_s_prompt_format_is_plain_data(
    server: client.Server, traces: Any, tmp_path: Path, imported: bool
) -> None:
    """Whoever made the trace: a request names the folder, so nothing in it runs in the server
    (a folder copied in by hand is not marked imported: issue 42's trust-by-provenance class)."""
    copy = tmp_path / "imported"
    shutil.copytree(traces["ada"].dir, copy)
    doc = json.loads((copy / "trace.json").read_text())
    marker = tmp_path / "ran"
    if imported:
        doc["imported"] = True
    else:
        doc.pop("imported", None)
    doc["trace_id"] = "0bad" + doc["trace_id"][4:]
    # code a trusted road would import and run; the format it recorded says "?" where reverse-text says "="
    source = {"env_id": "subprocess:getoutput", "args": {"cmd": f"touch {marker}"}, "text_template": "{prompt}?"}
    doc["data"]["train"]["sources"] = [source]
    (copy / "trace.json").write_text(json.dumps(doc))
    body = {"lora_name": "ada-imported", "lora_path": str(resolve_checkpoint(copy / "checkpoints"))}
    assert _post(server, "/v1/load_lora_adapter", body)[0] == 200
    try:
        card = _card(server, "ada-imported")
        assert card["primenb"]["prompt_format"] == "text_template" and card["primenb"]["trace"] == doc["trace_id"]
        c = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
        text = c.completions.create(model=ADA, prompt="hello?", max_tokens=16, temperature=0).choices[0].text
        assert _chat(server, "ada-imported") == text  # "hello" shown as "hello?", as recorded
        assert not marker.exists()  # the recorded environment was never built
    finally:
        client._admin(server, "DELETE", "/admin/models/ada-imported")


def test_unloading_removes_lora_adapters_only(server: client.Server, traces: Any) -> None:
    for name, says in ((BASE, "a base model"), (FULL, "a full fine-tune"), ("nope", "cannot be found")):
        status, body = _post(server, "/v1/unload_lora_adapter", {"lora_name": name})
        assert status == 404 and body["error"]["code"] == "model_not_found", name
        assert says in body["error"]["message"] and body["error"]["type"] == "not_found_error"
    assert {BASE, FULL} <= set(server.refresh().models)  # BASE is ADA's and ADB's parent: still served
    assert (
        _post(server, "/v1/load_lora_adapter", {"lora_name": "ada-rt", "lora_path": _checkpoint(traces["ada"])})[0]
        == 200
    )
    assert _post(server, "/v1/unload_lora_adapter", {"lora_name": "ada-rt"})[0] == 200
    # as vLLM's --lora-modules: an adapter served from the start is a LoRA adapter too
    assert _post(server, "/v1/unload_lora_adapter", {"lora_name": ADB})[0] == 200
    try:
        assert not {"ada-rt", ADB} & set(server.refresh().models)
        assert _chat(server, ADA)  # the base under it still serves the others
    finally:
        client.add("adb", server=server)
    assert ADB in server.refresh().models
