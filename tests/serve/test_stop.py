"""The server's stop, against a real server on the embedded model: SIGTERM and ``primenb serve stop``
answer 503 to new requests (not a refused connection), end what still decodes with finish reason
``abort`` (streams then ``[DONE]``), and exit, dropping the registry record."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from primenb.serve import client, registry

pytestmark = pytest.mark.slow  # starts server processes

BASE = "primenb/tiny-byte"
HANG_S = 60.0  # only catches a hang: a stop takes about a second here


def _request(url: str, body: dict[str, Any] | None = None) -> urllib.request.Request:
    data = json.dumps(body).encode() if body is not None else None
    return urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})


def _status(url: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(_request(url, body), timeout=HANG_S) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _long(stream: bool) -> dict[str, Any]:
    """A chat that decodes the whole context (ignore_eos): still decoding when the stop comes."""
    messages = [{"role": "user", "content": "hello"}]
    return {"model": BASE, "messages": messages, "max_tokens": 10**6, "ignore_eos": True, "stream": stream}


def _in_flight(server: client.Server, rows: int) -> None:
    """Wait until ``rows`` rows decode (the admin routes answer while the server decodes)."""
    end = time.monotonic() + HANG_S
    while client._admin(server, "GET", "/admin/stats")["rows_in_flight"] < rows:
        assert time.monotonic() < end, "the requests never started decoding"
        time.sleep(0.02)


def _exited(server: client.Server) -> None:
    end = time.monotonic() + HANG_S
    while not client._exited(server.pid):
        assert time.monotonic() < end, "the server did not exit"
        time.sleep(0.05)


def _stop_while_decoding(server: client.Server, stop: Any) -> None:
    root = server.url.rsplit("/v1", 1)[0]
    plain: list[tuple[int, dict[str, Any]]] = []  # a non-streamed request, answered at the stop
    waiter = threading.Thread(target=lambda: plain.append(_status(f"{server.url}/chat/completions", _long(False))))
    waiter.start()
    with urllib.request.urlopen(_request(f"{server.url}/chat/completions", _long(True)), timeout=HANG_S) as stream:
        _in_flight(server, 2)
        stop()
        health = 200
        end = time.monotonic() + HANG_S
        while health != 503:  # the stop has begun
            assert time.monotonic() < end
            health = _status(f"{root}/health")[0]
        status, body = _status(f"{server.url}/chat/completions", _long(False))
        assert status == 503 and "stopping" in body["error"]["message"]  # an answer, not a refused connection
        assert _status(f"{server.url}/models")[0] == 503
        events = [line.decode().strip() for line in stream if line.strip()]
    assert events[-1] == "data: [DONE]"
    last = json.loads(events[-2].removeprefix("data: "))
    assert last["choices"][0]["finish_reason"] == "abort"
    waiter.join(HANG_S)
    (status, body), *_ = plain
    assert status == 200 and body["choices"][0]["finish_reason"] == "abort"
    _exited(server)
    assert not (registry.folder() / f"{server.pid}.json").exists()


@pytest.fixture
def quick_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows decoding at the stop are aborted at once (the grace is 1 s; 0 keeps the test from
    depending on how fast this machine decodes the context)."""
    monkeypatch.setenv("PRIMENB_SERVE_STOP_GRACE_S", "0")


def _start() -> tuple[client.Server, Path]:
    """A server on the embedded model, and its log."""
    before = set(registry.folder().glob("server-*.log"))
    server = client.start(base=BASE)
    (log,) = set(registry.folder().glob("server-*.log")) - before
    return server, log


def test_sigterm_answers_503_aborts_streams_and_exits(serve_home: Path, quick_stop: None) -> None:
    server, log = _start()
    try:
        _stop_while_decoding(server, lambda: os.kill(server.pid, signal.SIGTERM))
    finally:
        server.stop()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text and "graceful shutdown exceeded" not in text, text[-2000:]


def test_serve_stop_from_the_cli_runs_the_same_stop(serve_home: Path, quick_stop: None) -> None:
    server, _ = _start()
    done: list[subprocess.CompletedProcess[str]] = []

    def cli_stop() -> None:
        cmd = [sys.executable, "-m", "primenb.cli", "serve", "stop", str(server.pid)]
        run = threading.Thread(target=lambda: done.append(subprocess.run(cmd, capture_output=True, text=True)))
        run.start()
        threads.append(run)

    threads: list[threading.Thread] = []
    try:
        _stop_while_decoding(server, cli_stop)
    finally:
        server.stop()
    threads[0].join(HANG_S)
    assert done and done[0].returncode == 0, done
    assert server.url in done[0].stdout
