"""Records are data, round 2 (issue 42): a forged server record with a ``remote`` part skipped the
liveness check, so eval sent its prompts to whatever port the record named; and an ``/admin/stats``
answer of another shape crashed `serve list` with KeyError. A remote record is now verified like a
local one (the process it names is our forward, bound to the record's port) and the answer is parsed
by a typed model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.serve import client, registry
from tests.homes import plain_home  # noqa: F401  (this folder's conftest has a work/ home; these take the plain one)
from tests.polling import wait_for

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def fake_forward(home: Path) -> Any:
    """A process that looks as our ``ssh -N -L SPEC`` does (argv[0] ends in ssh, the spec in argv)."""
    ssh = home / "ssh"
    ssh.symlink_to(sys.executable)
    spec = "127.0.0.1:8123:127.0.0.1:9000"
    proc = subprocess.Popen([str(ssh), "-c", "import time; time.sleep(120)", "-N", "-L", spec])
    # until the child has exec'd, /proc shows the parent's command line (seen on a loaded machine)
    wait_for(lambda: spec.encode() in Path(f"/proc/{proc.pid}/cmdline").read_bytes(), 60, "the forward's exec")
    yield proc, spec
    proc.kill()
    proc.wait()


def _remote(forward: str, port: int = 9000) -> dict[str, Any]:
    return {"backend": "ssh", "trace": "t", "where": "h", "dir": "/tmp/x", "pid": 7, "port": port, "forward": forward}


def test_a_remote_record_is_used_only_when_its_forward_is_the_process_it_names(fake_forward: Any) -> None:
    proc, spec = fake_forward
    good = client.Server("http://127.0.0.1:8123/v1", proc.pid, ["m"], None, _remote(spec))
    assert good.verified()  # the control: the forward it names, bound to its URL's port
    forged = [
        client.Server("http://127.0.0.1:8123/v1", os.getpid(), ["m"], None, _remote(spec)),  # not a forward
        client.Server("http://127.0.0.1:9999/v1", proc.pid, ["m"], None, _remote(spec)),  # another port here
        client.Server("http://127.0.0.1:8123/v1", proc.pid, ["m"], None, _remote(spec, port=9001)),  # there
        client.Server("http://127.0.0.1:8123/v1", proc.pid, ["m"], None, _remote("127.0.0.1:8123:x")),
        client.Server("http://127.0.0.1:8123/v1", 2**22 + 7, ["m"], None, _remote(spec)),  # no such process
    ]
    assert not any(s.verified() for s in forged)


@SETTINGS
@given(
    pid=st.sampled_from(["self", "forward", "none"]),
    url_port=st.integers(1, 65535),
    forward=st.one_of(
        st.text(max_size=30),
        st.builds(lambda a, b: f"127.0.0.1:{a}:127.0.0.1:{b}", st.integers(0, 70000), st.integers(0, 70000)),
    ),
    there=st.integers(1, 65535),
)
def test_generated_remote_records_are_verified_or_refused_never_trusted(
    fake_forward: Any, pid: str, url_port: int, forward: str, there: int
) -> None:
    proc, spec = fake_forward
    number = {"self": os.getpid(), "forward": proc.pid, "none": 2**22 + 9}[pid]
    s = client.Server(f"http://127.0.0.1:{url_port}/v1", number, ["m"], None, _remote(forward, there))
    expected = pid == "forward" and forward == spec and url_port == 8123 and there == 9000
    assert s.verified() is expected


def test_eval_never_picks_a_forged_remote_record(home: Path, fake_forward: Any) -> None:
    """`evaluate._server_for` goes through the running servers; a forged remote record that serves
    the wanted model is skipped with a warning (and then a server of its own would be started)."""
    from primenb.serve import evaluate

    registry.write(
        {"url": "http://127.0.0.1:8123/v1", "models": ["m"], "started": 1.0, "pid": os.getpid()}
        | {"remote": _remote(fake_forward[1])}
    )
    target = evaluate.Target(label="m", model_id="m", trace=None)
    started: list[Any] = []

    def refuse_start(*a: Any, **k: Any) -> Any:
        started.append(a)
        raise client.ServeError("not started in this test")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(client, "start", refuse_start)
        with warnings.catch_warnings(record=True) as seen, pytest.raises(client.ServeError):
            warnings.simplefilter("always")
            evaluate._server_for([target])
    assert started  # the forged record was not used
    assert any("not backed by its process" in str(w.message) for w in seen)


# -- /admin/stats answers --------------------------------------------------------------------------


class _Answer(BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def answering() -> Any:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd
    httpd.shutdown()


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)
ANSWERS = st.one_of(
    _JSON,
    st.fixed_dictionaries({"uptime_s": _JSON, "requests": _JSON}),
    st.fixed_dictionaries({"uptime_s": st.floats(), "requests": st.integers() | st.booleans()}),
)


@SETTINGS
@given(answer=ANSWERS)
def test_any_stats_answer_is_a_typed_value_or_a_serve_error(answering: Any, answer: Any) -> None:
    _Answer.body = json.dumps(answer).encode()
    s = client.Server(f"http://127.0.0.1:{answering.server_address[1]}/v1", 1, [], None, None)
    try:
        stats = s.stats()
    except client.ServeError as exc:
        assert "/admin/stats" in str(exc)
        return
    assert isinstance(stats["uptime_s"], float) and stats["uptime_s"] >= 0
    assert isinstance(stats["requests"], int) and not isinstance(stats["requests"], bool)


def test_serve_list_shows_a_server_with_a_bad_answer(answering: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    _Answer.body = json.dumps({"models": []}).encode()  # the issue's: no uptime_s, no requests
    s = client.Server(f"http://127.0.0.1:{answering.server_address[1]}/v1", 1, [], None, None)
    monkeypatch.setattr(client, "servers", lambda **_: [s])
    frame = client.table()
    assert list(frame["requests"]) == [-1]
