"""Fast checks without a trained model: the wire format and errors of the HTTP layer over a stand-in
pool, the key rules, model ids from hostile trace names, and eval samples under privacy deny."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from primenb.engine.serve_errors import ServeError
from primenb.serve import registry
from primenb.serve.app import State, build_app
from primenb.serve.client import _safe


class EchoPool:
    """Answers with the prompt reversed; a 10-token context."""

    def __init__(self) -> None:
        self.entries = {"m": SimpleNamespace(id="m", kind="base", trace=None)}

    def entry(self, served_id: str) -> Any:
        if served_id not in self.entries:
            raise ServeError(f"The model {served_id!r} does not exist.", 404, "model")
        return self.entries[served_id]

    def render(self, entry: Any, prompt: Any) -> tuple[str, bool]:
        return (prompt if isinstance(prompt, str) else prompt[-1]["content"]), False

    def prompt_format(self, entry: Any) -> str:
        return "raw"  # render shows the last user message as is

    def count(self, entry: Any, text: str, templated: bool) -> int:
        return len(text)

    def context_limit(self, entry: Any) -> int:
        return 10

    def weight_bytes(self) -> int:
        return 0

    def generate(
        self, entry: Any, text: str, templated: bool, *, max_tokens: int, n: int, on_text: Any = None, **_: Any
    ) -> list[dict[str, Any]]:
        out = text[::-1][:max_tokens]
        if on_text is not None:
            for ch in out:
                on_text(0, ch)
        return [{"text": out, "finish_reason": "stop", "completion_tokens": len(out), "prompt_tokens": len(text)}] * n


def app(key: str | None = None) -> TestClient:
    return TestClient(build_app(State(EchoPool(), api_key=key, loader=lambda s: None)))


def test_openai_shapes_and_errors() -> None:
    c = app()
    card = c.get("/v1/models").json()["data"][0]
    assert card["id"] == "m" and card["primenb"]["prompt_format"] == "raw"
    r = c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "abc"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "cba"
    assert r.json()["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    r = c.post("/v1/completions", json={"model": "m", "prompt": "abc", "stream": True})
    lines = [line for line in r.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    assert "".join(json.loads(x[6:])["choices"][0]["text"] for x in lines[:-1]) == "cba"
    cases = [
        ({"model": "nope", "prompt": "a"}, 404, "model"),
        ({"model": "m"}, 400, "prompt"),
        ({"model": "m", "prompt": "a", "n": 0}, 400, "n"),
        ({"model": "m", "prompt": "a", "top_p": 2}, 400, "top_p"),
        ({"model": "m", "prompt": "a", "stop": [1]}, 400, "stop"),
        ({"model": "m", "prompt": "a", "max_tokens": -1}, 400, "max_tokens"),
        ({"model": "m", "prompt": "x" * 10}, 400, "prompt"),  # over the 10-token context
    ]
    for body, status, param in cases:
        r = c.post("/v1/completions", json=body)
        assert r.status_code == status and r.json()["error"]["param"] == param, (body, r.text)
    r = c.post("/v1/completions", content=b"{oops")
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    assert c.get("/v2/whatever").json()["error"]["type"] == "not_found_error"
    r = c.post("/v1/completions", json={"model": "m", "prompt": "abc", "max_tokens": 10**9})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "cba"  # clamped, not refused


def test_key_checked_on_every_route() -> None:
    c = app("k3y")
    for method, path in (("get", "/v1/models"), ("get", "/admin/stats"), ("post", "/admin/shutdown")):
        assert getattr(c, method)(path).status_code == 401
        assert getattr(c, method)(path, headers={"Authorization": "Bearer nope"}).status_code == 401
    assert c.get("/v1/models", headers={"Authorization": "Bearer k3y"}).status_code == 200


def test_loopback_and_hostile_names() -> None:
    assert registry.is_loopback("127.0.0.1") and registry.is_loopback("::1") and registry.is_loopback("localhost")
    assert not registry.is_loopback("0.0.0.0") and not registry.is_loopback("example.com")
    for name in ["../../etc", "a b\nc", "x/../y", "", "é"]:
        safe = _safe(name)
        assert safe and all(ch.isalnum() or ch in "._-" for ch in safe) and "/" not in safe


def test_eval_samples_are_hashed_under_deny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    from primenb.serve.evaluate import _store

    trace = SimpleNamespace(run_dir=tmp_path / "run", doc={"privacy": {"data_collection": "deny"}})
    sample = {
        "model": "m",
        "example": 0,
        "rollout": 0,
        "prompt": "secret=",
        "completion": "terces",
        "answer": "terces",
        "reward": 1.0,
    }
    path = Path(_store(trace, "owner/env", {"reward_mean": 1.0}, [sample], "m", True, 0.0))
    assert path == tmp_path / "run" / "evals" / "owner-env.json"
    text = path.read_text()
    assert "secret" not in text and "terces" not in text
    stored = json.loads(text)["samples"][0]
    assert stored["prompt_chars"] == 7 and len(stored["completion_hash"]) >= 32 and stored["reward"] == 1.0


def _sleeper(argv0: str) -> Any:
    """A live process whose command line names ``argv0`` (a stand-in for a worker, or for an
    unrelated program that reused a dead server's pid)."""
    import subprocess
    import sys

    code = "import time; time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code, argv0])


def _hostile_records(other_pid: int) -> dict[str, Any]:
    """Records every client meets (`servers`, `list`, `stop`, the sidebar): each but "reused" names
    a live worker and is shaped wrong in one field a client relies on; "reused" is well shaped but
    its pid now runs another program. Values: the record, and whether a client may list it."""
    good = {"url": "http://127.0.0.1:9/v1", "models": ["m"], "started": 1.0}
    return {
        "good": (good, True),
        "started-text": ({**good, "started": "yesterday"}, True),  # read as 0: sorted first, listed
        "models-not-list": ({**good, "models": "m"}, True),  # read as no models
        "reused": ({**good, "pid": other_pid}, False),
        "no-url": ({"models": ["m"], "started": 1.0}, False),
        "url-not-http": ({**good, "url": "file:///etc/passwd"}, False),
        "pid-bool": ({**good, "pid": True}, False),
        "remote-not-table": ({**good, "remote": "host"}, False),
        "not-an-object": ([good], False),
    }


def test_hostile_registry_records_never_break_a_client_nor_signal_another_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import signal

    from primenb.serve import client

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    other = _sleeper("some-other-program")
    procs = [other]
    try:
        folder = registry.folder()
        listable = set()
        for name, (rec, ok) in _hostile_records(other.pid).items():
            proc = other if name == "reused" else _sleeper(registry.WORKER)
            procs.append(proc)
            if isinstance(rec, dict) and "pid" not in rec:
                rec = {**rec, "pid": proc.pid}
            (folder / f"{proc.pid}.json").write_text(json.dumps(rec))
            if ok:
                listable.add(proc.pid)
        os.mkfifo(folder / "4000999.json")  # a reader that opens it plainly blocks forever
        (folder / "4000998.json").write_bytes(b"\xff\xfe{not json")

        listed = client.servers(revive=False)
        assert {s.pid for s in listed} == listable
        assert not (folder / f"{other.pid}.json").exists()  # the stale record of a reused pid is dropped
        client.stop("all")
        for proc in procs[1:]:
            if proc.pid in listable:
                assert proc.wait(timeout=10) == -signal.SIGTERM
        assert other.poll() is None  # the program that reused a pid was never signalled
    finally:
        for p in procs:
            p.kill()
            p.wait()
