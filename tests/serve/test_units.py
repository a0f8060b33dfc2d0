"""Fast checks without a trained model: the wire format and errors of the HTTP layer over a stand-in
pool, the key rules, model ids from hostile trace names, and eval samples under privacy deny."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import Admitted, Delta, Done, Event, Failed, Finished, GenRequest, TokenLogprob
from primenb.serve import registry
from primenb.serve.app import State
from primenb.serve.asgi import build_app
from primenb.serve.client import _safe
from primenb.serve.wire import Pacing


class EchoPool:
    """One model, ``m``, with a 10-token context (a character is a token)."""

    def __init__(self) -> None:
        self.entries = {"m": SimpleNamespace(id="m", kind="base", trace=None, root="m", parent=None)}

    def prompt_format(self, entry: Any) -> str:
        return "raw"

    def renderer(self, entry: Any) -> Any:
        return SimpleNamespace(name="chat_template")

    def tool_call_parser(self, entry: Any) -> str | None:
        return "hermes"

    def context_limit(self, entry: Any) -> int:
        return 10

    def weight_bytes(self) -> int:
        return 0


class EchoScheduler:
    """Stands in for `primenb.engine.batching.Scheduler`: answers each row with the prompt reversed,
    one character per event, on a thread of its own (as the real one emits from its thread)."""

    def __init__(self) -> None:
        self.pool = EchoPool()
        self.stopping = False
        self.full = False
        self.removed: list[str] = []
        self.step_s: float | None = None  # set: one event per decode step, this far apart

    def submit(self, req: GenRequest) -> None:
        if self.stopping:
            raise ServeError("stopping", ErrorKind.STOPPING)
        if self.full:
            raise ServeError("queue full", ErrorKind.BUSY, code="rate_limit_exceeded")
        threading.Thread(target=self._run, args=(req,), daemon=True).start()

    def _run(self, req: GenRequest) -> None:
        if isinstance(req.prompt, list) and req.prompt and isinstance(req.prompt[0], int):  # token ids
            ids = [int(t) for t in req.prompt]  # type: ignore[arg-type]
            req.emit_all([Admitted(len(ids), req.seed)])
            for i in range(req.sampling.n):
                req.emit_all([Delta(i, "", None, [t]) for t in ids[::-1]])
                req.emit_all([Finished(i, "stop", len(ids), 1)])  # ended by token 1, as by an end of text
            req.emit_all([Done(len(ids), len(ids) * req.sampling.n)])
            return
        text = req.prompt if isinstance(req.prompt, str) else str(req.prompt.messages[-1]["content"])  # type: ignore[union-attr]
        if text.startswith("slow"):  # admitted after the other prompts of its call have finished
            time.sleep(0.3)
        if len(text) >= 10:
            req.emit_all([Failed(ServeError("too long", ErrorKind.INVALID, "prompt", "context_length_exceeded"))])
            return
        req.emit_all([Admitted(len(text), req.seed)])
        out = text[::-1][: min(req.sampling.max_tokens or 99, 10 - len(text))]
        for i in range(req.sampling.n):
            if self.step_s is not None:
                for ch in out:
                    req.emit_all([Delta(i, ch, None, [ord(ch)])])
                    time.sleep(self.step_s)
            else:
                req.emit_all([Delta(i, ch) for ch in out])  # one step's worth of events at a time
            req.emit_all([Finished(i, "stop", len(out))])
        req.emit_all([Done(len(text), len(out) * req.sampling.n)])

    def call(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def remove(self, served_id: str) -> None:
        self.removed.append(served_id)

    def stats(self) -> dict[str, Any]:
        return {"requests": 0, "inflight": 0}

    def stop_admitting(self) -> None:
        self.stopping = True


PORT = 8123
URL = f"http://127.0.0.1:{PORT}"


def app(key: str | None = None, loader: Any = None) -> TestClient:
    state = State(EchoScheduler(), api_key=key, loader=loader or (lambda s: None), port=PORT)
    state.refresh_cards()
    return TestClient(build_app(state), base_url=URL)


def test_openai_shapes_and_errors() -> None:
    c = app()
    card = c.get("/v1/models").json()["data"][0]
    assert card["id"] == "m" and card["primenb"]["prompt_format"] == "raw" and card["max_model_len"] == 10
    r = c.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "abc"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "cba"
    assert r.json()["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    r = c.post(
        "/v1/completions",
        json={"model": "m", "prompt": "abc", "stream": True, "stream_options": {"include_usage": True}},
    )
    docs = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    assert r.text.rstrip().endswith("data: [DONE]")
    assert "".join(d["choices"][0]["text"] for d in docs[:-1]) == "cba"
    assert all(d["usage"] is None for d in docs[:-1]) and docs[-1]["usage"]["completion_tokens"] == 3
    r = c.post("/v1/completions", json={"model": "m", "prompt": ["ab", "cd"], "n": 2})
    assert [ch["text"] for ch in r.json()["choices"]] == ["ba", "ba", "dc", "dc"]
    r = c.post("/v1/completions", json={"model": "m", "prompt": ["ab", "slowc"]})
    assert [ch["text"] for ch in r.json()["choices"]] == ["ba", "cwols"]
    cases = [
        ({"model": "nope", "prompt": "a"}, 404, "model"),
        ({"model": "m"}, 400, "prompt"),
        ({"model": "m", "prompt": "a", "n": 0}, 400, "n"),
        ({"model": "m", "prompt": "a", "top_p": 2}, 400, "top_p"),
        ({"model": "m", "prompt": "a", "stop": [1]}, 400, "stop"),
        ({"model": "m", "prompt": "a", "max_tokens": -1}, 400, "max_tokens"),
        ({"model": "m", "prompt": "x" * 10}, 400, "prompt"),  # over the 10-token context
        ({"model": "m", "prompt": "a", "stream": "false"}, 400, "stream"),
        ({"model": "m", "prompt": "a", "seed": 2**64}, 400, "seed"),
        ({"model": "m", "prompt": "a", "suffix": "z"}, 400, "suffix"),
        ({"model": "m", "prompt": "a", "frobnicate": 1}, 400, "frobnicate"),
        ({"model": "m", "prompt": "a", "stream_options": "yes", "stream": True}, 400, "stream_options"),
    ]
    for body, status, param in cases:
        r = c.post("/v1/completions", json=body)
        assert r.status_code == status and r.json()["error"]["param"] == param, (body, r.text)
    r = c.post("/v1/completions", content=b"{oops", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
    assert c.get("/v2/whatever").json()["error"]["type"] == "not_found_error"
    r = c.post("/v1/completions", json={"model": "m", "prompt": "abc", "max_tokens": 10**9})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "cba"  # clamped, not refused


def _released(pacing: Pacing, batch: list[tuple[int, Event]]) -> list[tuple[int, str, str]]:
    return [
        (i, type(e).__name__, e.text if isinstance(e, Delta) else getattr(e, "reason", ""))
        for i, e in pacing.release(batch)
    ]


def test_pacing_merges_what_waited_and_holds_a_row_to_its_interval() -> None:
    together = [
        (0, Delta(0, "a", [TokenLogprob("a", -1.0)], [1])),
        (0, Delta(1, "x", None, [9])),
        (0, Delta(0, "b", [TokenLogprob("b", -2.0)], [2])),
        (0, Finished(1, "stop", 1)),
        (1, Delta(0, "c", None, [3])),
        (0, Delta(0, "d", [TokenLogprob("d", -3.0)], [4])),
    ]
    pacing = Pacing()
    out = pacing.release(together)
    # each row's deltas as one, in order; a row's end after its text; other rows apart
    assert [(i, type(e).__name__) for i, e in out] == [(0, "Delta"), (0, "Finished"), (0, "Delta"), (1, "Delta")]
    (_, x), (_, end), (_, abd), (_, c) = out
    assert isinstance(x, Delta) and (x.index, x.text) == (1, "x") and isinstance(end, Finished) and end.index == 1
    assert isinstance(abd, Delta) and (abd.index, abd.text, abd.token_ids) == (0, "abd", [1, 2, 4])
    assert [lp.token for lp in abd.logprobs or []] == ["a", "b", "d"]
    assert isinstance(c, Delta) and (c.text, c.logprobs) == ("c", None)

    paced = Pacing(3)  # vLLM's stream_interval: the first text at once, then every 3 tokens, the rest at the end
    assert _released(paced, [(0, Delta(0, "", None, [7]))]) == [(0, "Delta", "")]  # no text yet: not started
    assert _released(paced, [(0, Delta(0, "a", None, [1]))]) == [(0, "Delta", "a")]
    assert _released(paced, [(0, Delta(0, "b", None, [2]))]) == []
    assert _released(paced, [(0, Delta(0, "c", None, [3])), (0, Delta(0, "d", None, [4]))]) == [(0, "Delta", "bcd")]
    assert _released(paced, [(0, Delta(0, "e", None, [5]))]) == []
    assert _released(paced, [(0, Finished(0, "length", 6)), (0, Done(1, 6))]) == [
        (0, "Delta", "e"),
        (0, "Finished", "length"),
        (0, "Done", ""),
    ]


@pytest.mark.parametrize("interval", [1, 3])
def test_a_stream_s_chunks_follow_the_stream_interval(interval: int) -> None:
    scheduler = EchoScheduler()
    scheduler.step_s = 0.02
    state = State(scheduler, api_key=None, loader=lambda s: None, port=PORT, stream_interval=interval)
    state.refresh_cards()
    c = TestClient(build_app(state), base_url=URL)
    body = {"model": "m", "messages": [{"role": "user", "content": "abcd"}], "stream": True}
    r = c.post("/v1/chat/completions", json={**body, "stream_options": {"include_usage": True}})
    docs = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: {")]
    texts = [d["choices"][0]["delta"].get("content") for d in docs if d["choices"]]
    assert texts[0] == "" and "".join(t or "" for t in texts) == "dcba" and texts[-1] is None
    assert docs[-1]["usage"]["completion_tokens"] == 4 and r.text.rstrip().endswith("data: [DONE]")
    if interval == 3:  # the first token at once, the next three together (the steps are 20 ms apart)
        assert [t for t in texts if t] == ["d", "cba"]


def test_a_full_queue_answers_429_with_retry_after_and_stopping_503() -> None:
    c = app()
    c.app.state.scheduler.full = True  # type: ignore[attr-defined]
    r = c.post("/v1/completions", json={"model": "m", "prompt": "ab"})
    assert r.status_code == 429 and r.headers["retry-after"] == "1" and r.json()["error"]["type"] == "rate_limit_error"
    c.app.state.scheduler.stopping = True  # type: ignore[attr-defined]
    r = c.post("/v1/completions", json={"model": "m", "prompt": "ab"})
    assert r.status_code == 503 and c.get("/health").status_code == 503


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
    from primenb.serve.evaluate import _mine, _store

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
    base = {**sample, "model": "b", "completion": "baseline-terces"}
    # the baseline's samples are kept as the candidate's are: hashed the same way under deny
    baseline = {"model": "b", "summary": {"reward_mean": 0.0}, "samples": _mine([sample, base], "b", True)}
    taken = {"seed": 0, "pass_reward": 1.0, "num_examples": 1, "rollouts": 1, "env_args": {}}
    mine = _mine([sample, base], "m", True)
    path = Path(_store(trace, "owner/env", {"reward_mean": 1.0}, mine, "m", 0.0, taken, baseline))
    assert path == tmp_path / "run" / "evals" / "owner-env.json"
    text = path.read_text()
    assert "secret" not in text and "terces" not in text
    stored = json.loads(text)["samples"]
    assert len(stored) == 1 and stored[0]["prompt_chars"] == 7 and len(stored[0]["completion_hash"]) >= 32
    assert stored[0]["reward"] == 1.0
    kept = json.loads(text)["baseline"]["samples"]
    assert len(kept) == 1 and kept[0]["model"] == "b" and len(kept[0]["completion_hash"]) >= 32


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
                assert proc.wait(timeout=120) == -signal.SIGTERM
        assert other.poll() is None  # the program that reused a pid was never signalled
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_listing_no_servers_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.commands import ServeListArgs
    from primenb.verbs import serve

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    said: list[str] = []
    face = SimpleNamespace(say=said.append)
    assert serve.list_(ServeListArgs(json=False), face) is None  # type: ignore[arg-type]
    assert said == ["no primenb server is running; start one with %prime_serve TRACE (or: primenb serve TRACE)"]
    serve.list_(ServeListArgs(json=True), face)  # type: ignore[arg-type]
    assert json.loads(said[-1]) == []
