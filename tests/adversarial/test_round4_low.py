"""Issue 42's low items, each with its fix: `serve` numbers out of range are clear errors (no
traceback from the socket, no silent clamp), a key given as `--api-key-var` is refused without
being echoed, run names with bidirectional controls are refused, `primenb validate --fix` exists
and never replaces a file with one that does not validate, the server refuses duplicated deciding
headers, answers on any 127/8 address it was bound to, times out a body that never arrives, and
Apply refuses a bundle whose config.toml holds no settings."""

from __future__ import annotations

import asyncio
import json
import string
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError
from primenb.serve import client

# -- serve start numbers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "kwargs"),
    [
        ("--port", {"port": 70000}),
        ("--port", {"port": -1}),
        ("--port", {"port": True}),
        ("--max-batch", {"max_batch": 0}),
        ("--max-batch", {"max_batch": -4}),
        ("--max-queue", {"max_queue": 0}),
        ("--stream-interval", {"stream_interval": 0}),
    ],
)
def test_serve_numbers_out_of_range_are_named_errors_before_anything_starts(option: str, kwargs: Any) -> None:
    with pytest.raises(client.ServeError, match=option):
        client.start(["no-such-trace"], **kwargs)  # refused before the trace is even looked up


def test_the_cli_says_so_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    from primenb.cli import main

    assert main(["serve", "start", "--port", "70000"]) != 0
    out = capsys.readouterr()
    assert "--port" in out.err + out.out and "Traceback" not in out.err + out.out


# -- --api-key-var given a key ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    key=st.one_of(
        st.text("0123456789abcdef", min_size=16, max_size=64),
        st.text("0123456789ABCDEF", min_size=16, max_size=64),
        st.text(string.ascii_letters + string.digits, min_size=20, max_size=64).filter(
            lambda s: sum(c.isdigit() for c in s) >= 4
        ),
    )
)
def test_a_key_given_as_the_variable_name_is_refused_and_never_echoed(key: str) -> None:
    with pytest.raises(client.ServeError) as err:
        client.check_key_var(key)
    assert key not in str(err.value) and "not shown" in str(err.value)


@pytest.mark.parametrize("name", ["PRIMENB_API_KEY", "MY_SERVER_KEY_2", "OPENAI_API_KEY", "KEY"])
def test_variable_names_are_still_names(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(name, "value")
    client.check_key_var(name)  # a set variable: accepted


# -- run names ------------------------------------------------------------------------------------

FORMAT_CHARS = st.sampled_from(
    ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200b", "\u200f", "\ufeff"]
)


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(string.ascii_letters, max_size=8), mark=FORMAT_CHARS, after=st.text(string.ascii_letters, max_size=8)
)
def test_a_run_name_with_a_bidirectional_or_invisible_control_is_refused(before: str, mark: str, after: str) -> None:
    from primenb.protocol.safepath import UnsafePathError, safe_name

    with pytest.raises(UnsafePathError, match="U\\+202E"):
        safe_name(before + mark + after)
    assert safe_name("run-é-名前") == "run-é-名前"  # letters of any script stay fine


# -- validate --fix --------------------------------------------------------------------------------


def test_validate_fix_rewrites_legacy_keys_and_never_writes_a_bad_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from primenb.cli import main
    from primenb.config.templates import starter

    good = starter(None, None)
    assert "group_size = " in good
    legacy = good.replace("group_size = ", "rollouts_per_example = ", 1)
    path = tmp_path / "rl.toml"
    path.write_text("# my comment\n" + legacy)
    assert main(["validate", str(path)]) == 1  # the hint names --fix: it must exist
    assert main(["validate", "--fix", str(path)]) == 0
    fixed = path.read_text()
    assert "rollouts_per_example" not in fixed and "group_size" in fixed and fixed.startswith("# my comment\n")

    broken = legacy + "\n[trainer]\nno_such_key_here = 1\n"  # migrates, but still does not validate
    path.write_text(broken)
    assert main(["validate", "--fix", str(path)]) == 1
    assert path.read_text() == broken  # left as it was
    assert "not rewritten" in capsys.readouterr().out


# -- the server's guard -----------------------------------------------------------------------------


def _guard(host: str = "127.0.0.1") -> Any:
    from primenb.serve.guard import MAX_BODY, Guard

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    state = types.SimpleNamespace(host=host, port=8000, api_key=None, stopping=False, max_body=MAX_BODY)
    return Guard(app, state), reached


def _call(guard: Any, headers: list[tuple[str, str]], *, method: str = "POST", receive: Any = None) -> int:
    sent: list[dict[str, Any]] = []

    async def default_receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": "/admin/shutdown",
        "headers": [(k.encode(), v.encode()) for k, v in headers],
    }
    asyncio.run(guard(scope, receive or default_receive, send))
    return int(sent[0]["status"])


GOOD_HEADERS = [("host", "127.0.0.1:8000"), ("content-type", "application/json")]


@settings(max_examples=200, deadline=None)
@given(
    name=st.sampled_from(["host", "origin", "content-type", "content-length", "authorization"]),
    first=st.sampled_from(["text/plain", "127.0.0.1:8000", "http://evil.example", "application/json", "2"]),
    second=st.sampled_from(["text/plain", "127.0.0.1:8000", "http://127.0.0.1:8000", "application/json", "2"]),
)
def test_a_deciding_header_sent_twice_is_refused(name: str, first: str, second: str) -> None:
    guard, reached = _guard()
    headers = [*GOOD_HEADERS, (name, first), (name, second)]
    assert _call(guard, headers) == 400
    assert reached == []


def test_the_control_request_and_a_127_8_host_are_answered() -> None:
    guard, reached = _guard()
    assert _call(guard, GOOD_HEADERS) == 200
    assert reached == ["/admin/shutdown"]
    guard2, _ = _guard("127.0.0.2")
    assert _call(guard2, [("host", "127.0.0.2:8000"), ("content-type", "application/json")]) == 200
    assert _call(guard2, [("host", "evil.example:8000"), ("content-type", "application/json")]) == 403


def test_a_body_that_never_arrives_is_timed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.serve import guard as guard_module

    monkeypatch.setattr(guard_module, "BODY_TIMEOUT_S", 0.2)
    guard, reached = _guard()

    async def trickle() -> dict[str, Any]:
        await asyncio.sleep(0.15)  # a byte now and then: each chunk in time, the whole body never
        return {"type": "http.request", "body": b" ", "more_body": True}

    assert _call(guard, GOOD_HEADERS, receive=trickle) == 408
    assert reached == []


# -- Apply on an emptied bundle -----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n"])
def test_apply_refuses_a_trace_whose_config_holds_no_settings(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import primenb.harness as h
    from primenb.protocol.record import write_trace

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "bundle"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "config.toml").write_text(text)
    ckpt = run_dir / "checkpoints" / "step_2"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text(json.dumps({}))
    doc = {"trace_id": "00aa11bb22cc", "status": "completed", "mode": "rl", "name": "bundle"}
    write_trace(run_dir, {**doc, "final": {"step": 2, "path": str(ckpt), "kind": "model"}})
    for verb in (h.apply, h.rerun):
        with pytest.raises(PrimenbError, match="holds no settings"):
            verb(str(run_dir))
    assert not (tmp_path / "outputs").exists()  # nothing was launched
