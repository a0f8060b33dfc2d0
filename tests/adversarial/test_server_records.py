"""Issue 31, server records: a record is data, never argv nor a key to send. Hostile files in
PRIME_HOME/serve (huge numbers, pid 2**31, non-ASCII names, bad JSON, SSH options, a key variable
naming another secret) are skipped with a warning or read without their hostile part, and never
break the list of the other servers; ``--api-key-var`` must name a set variable."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError
from primenb.serve import client, registry

GOOD = {"url": "http://127.0.0.1:9/v1", "models": ["m"], "started": 1.0}
PROXY = "-oProxyCommand=touch {marker}"


@pytest.fixture
def worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A live stand-in for a serve worker (its command line names the worker module) with a
    well-shaped record: the one server every list must keep showing."""
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", registry.WORKER])
    registry.write({**GOOD, "pid": proc.pid})
    yield proc
    proc.kill()
    proc.wait()


def _listed() -> list[int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [s.pid for s in client.servers(revive=False)]


def test_the_issue_files_are_skipped_with_a_warning_and_the_good_server_stays_listed(worker: Any) -> None:
    folder = registry.folder()
    (folder / "99999999999999999999.json").write_text(json.dumps({**GOOD, "pid": 99999999999999999999}))
    (folder / f"{2**31}.json").write_text(json.dumps({**GOOD, "pid": 2**31}))
    (folder / "\u00b2.json").write_text(json.dumps({**GOOD, "pid": 2}))  # "²".isdigit() is True
    (folder / "12345.json").write_text("{not json")
    (folder / "12346.json").write_text(json.dumps({**GOOD, "pid": 12346, "url": "http://10.1.2.3:9/v1"}))
    with pytest.warns(UserWarning, match="skipping the server record") as caught:
        listed = client.servers(revive=False)
    assert [s.pid for s in listed] == [worker.pid]
    said = " ".join(str(w.message) for w in caught)
    assert "\u00b2" not in said and "\\xb2" in said  # a file name is shown escaped, never raw
    assert "not on this machine" in said  # a keyless record pointing away from loopback
    from primenb.server.servers import list_servers  # the sidebar's list reads the same files

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert [i["pid"] for i in list_servers()["servers"]] == [worker.pid]


def test_a_record_s_ssh_options_never_reach_ssh(worker: Any, tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    remote = {
        "backend": "ssh",
        "trace": "no-such-trace",
        "ssh": {"host": "localhost", "ssh_args": [PROXY.format(marker=marker)], "python": "/bin/sh"},
        "where": "x",
        "dir": "/tmp/primenb-serve.abcdef",
        "pid": 4242,
        "port": 8000,
        "forward": "127.0.0.1:9:127.0.0.1:8000",
    }
    registry.write({**GOOD, "pid": 4000001, "remote": remote})
    registry.write({**GOOD, "pid": 4000002, "remote": {**remote, "trace": None}})  # no trace: skipped
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        listed = {s.pid: s for s in client.servers(revive=True)}  # revive re-opens the host
    assert set(listed) == {worker.pid, 4000001}
    assert "ssh" not in (listed[4000001].remote or {})  # the options are not even kept
    with pytest.raises(PrimenbError):
        listed[4000001].stop(1.0)  # the host is looked up from the trace it names: there is none
    assert not marker.exists()


def test_a_record_s_key_variable_sends_only_the_server_s_own_key(worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_notsentnotsentnotsent12345")
    monkeypatch.setenv("PRIMENB_KEY", "the-server-key")
    registry.write({**GOOD, "pid": worker.pid, "api_key_var": "HF_TOKEN"})  # forged: no check
    (s,) = client.servers(revive=False)
    assert s.api_key_var is None and "Authorization" not in client._headers(s)
    check = registry.key_check("some other value")
    registry.write({**GOOD, "pid": worker.pid, "api_key_var": "HF_TOKEN", "api_key_check": check})
    (s,) = client.servers(revive=False)
    assert s.api_key_var is None  # the check is of another value: HF_TOKEN's is not the key
    registry.write(
        {**GOOD, "pid": worker.pid, "api_key_var": "PRIMENB_KEY"}
        | {"api_key_check": registry.key_check("the-server-key")}
    )
    (s,) = client.servers(revive=False)
    assert client._headers(s)["Authorization"] == "Bearer the-server-key"  # control: the real key goes


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_FIELD = st.sampled_from(["pid", "url", "models", "started", "remote", "api_key_var", "api_key_check", "port"])
_VALUE = (
    _JSON
    | st.integers(min_value=2**31 - 2, max_value=2**70)
    | st.sampled_from(["http://127.0.0.1:1/v1", "http://[::1]:x/v1", "http://user:pw@127.0.0.1:9/v1", "HF_TOKEN"])
    | st.fixed_dictionaries(
        {"backend": st.just("ssh"), "ssh": st.just({"ssh_args": ["-oProxyCommand=touch /tmp/x"]})},
        optional={"trace": st.text(max_size=5), "pid": _JSON, "port": _JSON, "dir": _JSON, "forward": _JSON},
    )
)
_NAME = st.text(min_size=1, max_size=12).filter(lambda n: "/" not in n and "\0" not in n and n not in (".", ".."))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=_NAME | st.integers(min_value=0, max_value=2**80).map(str),
    base=_JSON,
    fields=st.dictionaries(_FIELD, _VALUE, max_size=4),
)
def test_generated_bad_records_never_break_the_list(worker: Any, name: str, base: Any, fields: Any) -> None:
    folder = registry.folder()
    path = folder / f"{name}.json"
    rec = {**base, **fields} if isinstance(base, dict) else (fields or base)
    try:
        path.write_text(json.dumps(rec, allow_nan=True))
    except (OSError, ValueError):  # a name the file system refuses, a number JSON cannot hold
        return
    try:
        listed = _listed()
        assert worker.pid in listed  # one bad file never hides the others
        for rec_ in registry.records():
            assert 1 < rec_["pid"] < registry.MAX_PID
            assert "ssh" not in (rec_.get("remote") or {})
    finally:
        path.unlink(missing_ok=True)
        if path.name == f"{worker.pid}.json":
            registry.write({**GOOD, "pid": worker.pid})


@pytest.mark.parametrize(
    ("name", "env", "says"),
    [
        ("PRIMENB_UNSET_KEY", None, "not set or is empty"),
        ("PRIMENB_EMPTY_KEY", "", "not set or is empty"),
        ("hf_abcdefghijklmnopqrstuvwxyz0123456789", None, "not a name"),  # the token pasted as the name
        ("sk-abcdefghijklmnopqrstuvwxyz01234", None, "not a name"),
        ("A" * 80, None, "not a name"),
        ("my key", None, "not a name"),
    ],
)
def test_api_key_var_must_name_a_set_variable(
    name: str, env: str | None, says: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    if env is not None:
        monkeypatch.setenv(name, env)
    else:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(client.ServeError, match=says) as err:
        client.start(base="none", host="127.0.0.1", api_key_var=name)  # refused before anything starts
    if says == "not a name":
        assert name not in str(err.value)  # possibly the key itself: never echoed
    assert not list(registry.folder().iterdir())  # nothing written, no server started


def test_a_record_read_without_the_key_is_written_back_with_its_key_variable(
    worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PRIMENB_KEY", raising=False)
    check = registry.key_check("the-server-key")
    registry.write({**GOOD, "pid": worker.pid, "api_key_var": "PRIMENB_KEY", "api_key_check": check})
    rec = registry.read(worker.pid)
    assert rec is not None and rec["api_key_var"] is None  # this process does not hold the key
    registry.update_models(worker.pid, ["m", "n"])  # a read-modify-write, as the worker and revive do
    on_disk = json.loads((registry.folder() / f"{worker.pid}.json").read_text())
    assert on_disk["api_key_var"] == "PRIMENB_KEY" and on_disk["models"] == ["m", "n"]
    assert "recorded_key_var" not in on_disk
    monkeypatch.setenv("PRIMENB_KEY", "the-server-key")
    (s,) = client.servers(revive=False)
    assert s.api_key_var == "PRIMENB_KEY"


def test_a_non_loopback_url_is_listed_only_with_the_server_s_key(worker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    away = {**GOOD, "pid": worker.pid, "url": "http://10.1.2.3:9/v1", "api_key_var": "PRIMENB_KEY"}
    registry.write({**away, "api_key_check": registry.key_check("the-server-key")})
    monkeypatch.delenv("PRIMENB_KEY", raising=False)
    assert _listed() == []  # a forged record naming any variable cannot point the list elsewhere
    monkeypatch.setenv("PRIMENB_KEY", "the-server-key")
    assert _listed() == [worker.pid]
