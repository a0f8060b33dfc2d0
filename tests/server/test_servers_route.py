"""``GET servers`` / ``POST servers/stop``: the sidebar's list of running ``primenb serve`` servers.

A real server on the embedded tiny model is listed and stopped; registry records are hostile
(a forged or stale record naming another live process is never listed, so never signalled)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from primenb.serve import registry
from primenb.serve.registry import WORKER
from tests.bystander import Bystander
from tests.server.test_routes import error, get


def _post(jp_fetch: Any, body: str) -> Any:
    return jp_fetch("primenb", "api", "servers", "stop", method="POST", body=body)


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; each one ended (by its pid) at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait(timeout=10)


def _sleeper(procs: list[subprocess.Popen[bytes]], *argv: str) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *argv])
    procs.append(p)
    return p


def _record(pid: int, **extra: Any) -> None:
    rec = {"pid": pid, "host": "127.0.0.1", "port": 9, "url": "http://127.0.0.1:9/v1", "models": ["m"]}
    registry.write({**rec, "started": time.time() - 125, **extra})


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/models", timeout=5):
            return True
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.slow  # starts a real server process (torch and the tiny model: ~7 s on 2 cores)
async def test_a_real_server_is_listed_and_stopped(home: Path, jp_fetch: Any) -> None:
    from primenb.serve import client

    assert await get(jp_fetch, "servers") == {"servers": []}
    server = client.start([], base="primenb/tiny-byte")
    try:
        (item,) = (await get(jp_fetch, "servers"))["servers"]
        assert item["url"] == server.url and item["pid"] == server.pid
        assert item["models"] == ["primenb/tiny-byte"] and item["where"] == "this machine"
        assert 0 <= item["uptime_s"] < 120
        r = await _post(jp_fetch, json.dumps({"pid": server.pid}))
        assert json.loads(r.body) == {"pid": server.pid, "url": server.url, "stopped": True}
        assert (await get(jp_fetch, "servers"))["servers"] == []
        assert not _answers(server.url) and not registry.alive(server.pid)
        code, message = await error(jp_fetch, "servers", "stop", method="POST", body=json.dumps({"pid": server.pid}))
        assert code == 404 and "stopped already" in message
    finally:
        if registry.alive(server.pid):
            server.stop()


async def test_a_worker_record_is_listed_and_stopped(home: Path, jp_fetch: Any, procs: list[Any]) -> None:
    worker = _sleeper(procs, WORKER)  # a process whose command line is a serve worker's
    _record(worker.pid, models=["base", "base-adapter-run"])
    (item,) = (await get(jp_fetch, "servers"))["servers"]
    assert item["models"] == ["base", "base-adapter-run"] and 120 < item["uptime_s"] < 200
    await _post(jp_fetch, json.dumps({"pid": worker.pid}))
    assert worker.wait(timeout=120) is not None  # SIGTERM
    assert (await get(jp_fetch, "servers"))["servers"] == [] and registry.read(worker.pid) is None


async def test_a_record_naming_another_process_is_never_listed_nor_signalled(
    home: Path, jp_fetch: Any, procs: list[Any]
) -> None:
    """A stale record whose pid was reused, or a forged one: the process is not a serve worker."""
    other = Bystander.start(home / "bystander.log")
    procs.append(other.proc)
    _record(other.proc.pid)
    assert (await get(jp_fetch, "servers"))["servers"] == []
    code, _ = await error(jp_fetch, "servers", "stop", method="POST", body=json.dumps({"pid": other.proc.pid}))
    assert code == 404
    assert other.signals() == []  # still running: nothing was sent to it
    _record(os.getpid())  # not even the Jupyter server itself
    assert (await get(jp_fetch, "servers"))["servers"] == []


async def test_malformed_records_are_left_out(home: Path, jp_fetch: Any, procs: list[Any]) -> None:
    good = _sleeper(procs, WORKER)
    _record(good.pid)
    for bad in (
        {"url": "javascript:alert(1)"},
        {"url": None},
        {"url": "http://x/" + "a" * 400},
    ):
        _record(_sleeper(procs, WORKER).pid, **bad)
    odd = _sleeper(procs, WORKER)
    _record(odd.pid, models="not-a-list", started="yesterday")
    (registry.folder() / "12.json").write_text("{not json")
    (registry.folder() / "notes.json").write_text("[]")
    os.mkfifo(registry.folder() / "13.json")  # reading it must not block the route
    (registry.folder() / f"{good.pid + 100000}.json").write_text(json.dumps({"pid": good.pid, "url": "http://x"}))
    items = {i["pid"]: i for i in (await get(jp_fetch, "servers"))["servers"]}
    assert set(items) == {good.pid, odd.pid}
    assert items[odd.pid]["models"] == [] and items[odd.pid]["uptime_s"] is None


@pytest.mark.parametrize(
    "body",
    ["not json", "[]", "{}", '{"pid": "12"}', '{"pid": true}', '{"pid": 1}', '{"pid": 12, "x": 1}', '{"pid": 1e99}'],
)
async def test_stop_bad_input(home: Path, jp_fetch: Any, body: str) -> None:
    code, message = await error(jp_fetch, "servers", "stop", method="POST", body=body)
    assert code == 400, message


async def test_stop_unknown_pid(home: Path, jp_fetch: Any) -> None:
    code, message = await error(jp_fetch, "servers", "stop", method="POST", body='{"pid": 999999}')
    assert code == 404 and "no running primenb server with pid 999999" in message
