"""Serving over SSH without a host: where a trace is served, what one call may mix, and every
answer from the host or the registry checked before it reaches a shell, a port or a kill."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from primenb.backends import capabilities
from primenb.backends.ssh_serve import (
    ServeHostError,
    SSHServeHost,
    _folder,
    _pid,
    _port,
    stop_script,
)
from primenb.errors import PrimenbError
from primenb.serve import remote
from tests.bystander import Bystander


class FakeTrace:
    """What `remote.host_of` reads of a trace: its backend, run directory, name, final checkpoint."""

    def __init__(self, root: Path, name: str, backend: str = "local", host: str | None = None) -> None:
        self.name, self.run_dir = name, root / name
        self.run_dir.mkdir(parents=True)
        self.doc = {"backend": backend}
        self.final_checkpoint: Path | None = self.run_dir / "checkpoints" / "step_3"
        if host is not None:
            info = {"backend": "ssh", "host": host, "remote_dir": f"/srv/runs/{name}", "python": "/venv/bin/python"}
            (self.run_dir / "remote.json").write_text(json.dumps(info))

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)


def test_ssh_backends_serve_on_their_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    from primenb.backends.spec import add

    add("gpu-box", "ssh://me@gpu-box/~/runs")
    assert capabilities("ssh").serves_on_host and capabilities("gpu-box").serves_on_host
    assert capabilities("ssh://other/x").serves_on_host
    for here in ("local", "slurm", "modelfactory", "no-such-backend", None):
        assert not capabilities(here).serves_on_host


def test_one_host_per_server(tmp_path: Path) -> None:
    near = FakeTrace(tmp_path, "near")
    far = FakeTrace(tmp_path, "far", "ssh", host="gpu-box")
    far2 = FakeTrace(tmp_path, "far2", "ssh", host="gpu-box")
    other = FakeTrace(tmp_path, "other", "ssh", host="other-box")
    assert remote.one_host([near]) is None and remote.one_host([]) is None
    host = remote.one_host([far, far2])
    assert host is not None and host.describe() == "gpu-box"
    for mix, names in (([near, far], ("near on this machine", "far on gpu-box")), ([far, other], ("other-box",))):
        with pytest.raises(remote.PlacementError, match="different hosts") as exc:
            remote.one_host(mix)
        assert all(n in str(exc.value) for n in names) and "one server per host" in str(exc.value)


def test_the_checkpoint_served_is_the_hosts_own(tmp_path: Path) -> None:
    far = FakeTrace(tmp_path, "far", "ssh", host="gpu-box")
    host = remote.one_host([far])
    assert remote.checkpoint_on(host, far) == "/srv/runs/far/checkpoints/step_3"
    # a trace.json naming a checkpoint outside its run directory never reaches the host
    for hostile in (far.run_dir / ".." / "elsewhere", Path("/etc"), far.run_dir):
        far.final_checkpoint = hostile
        with pytest.raises(ServeHostError):
            remote.checkpoint_on(host, far)
    far.final_checkpoint = None
    with pytest.raises(ServeHostError, match="no final checkpoint"):
        remote.checkpoint_on(host, far)
    (far.run_dir / "remote.json").write_text(json.dumps({"host": "gpu-box", "remote_dir": "relative/dir"}))
    far.final_checkpoint = far.run_dir / "checkpoints" / "step_3"
    with pytest.raises(ServeHostError, match="names no run directory"):
        remote.checkpoint_on(host, far)


@pytest.mark.parametrize("bad", ["80", 0, 65536, -1, True, None, 8.0, [80]])
def test_ports_from_the_host_are_ints_in_range(bad: Any) -> None:
    with pytest.raises(ServeHostError):
        _port(bad)
    with pytest.raises(ServeHostError):
        _pid(bad if bad != 65536 else 1 << 30)


def test_host_answers_and_records_are_checked() -> None:
    assert _port(8000) == 8000 and _pid(4242) == 4242
    assert _folder("/tmp/primenb-serve.Ab12Cd34") == "/tmp/primenb-serve.Ab12Cd34"
    for bad in (
        "/",
        "/tmp",
        "/tmp/primenb-serve.ab",
        "/tmp/primenb-serve.Ab12Cd34/..",
        "tmp/primenb-serve.Ab12Cd34",
        "/tmp/x; rm -rf ~/primenb-serve.Ab12Cd34",
        "/tmp/$(reboot)/primenb-serve.Ab12Cd34",
        5,
        None,
    ):
        with pytest.raises(ServeHostError):
            _folder(bad)
    for record in (
        {"host": "-oProxyCommand=touch /tmp/pwned"},
        {"host": "box", "ssh_args": "-F cfg"},  # a string, not a list: would be split into letters
        {"host": "box", "python": "-c import os"},
        {"host": "box", "port": "22"},
        {"user": "me"},
    ):
        with pytest.raises(PrimenbError):
            SSHServeHost(record)
    host = SSHServeHost({"host": "box"})
    with pytest.raises(ServeHostError):  # refused before any ssh runs: no such host is reachable
        host.stop({"dir": "/home/me"})


def test_stop_script_ends_only_the_serve_worker_and_removes_its_folder(tmp_path: Path) -> None:
    def folder_for(pid: int) -> Path:
        folder = Path(
            subprocess.check_output(["mktemp", "-d", f"{tmp_path}/primenb-serve.XXXXXXXX"], text=True).strip()
        )
        (folder / "worker.pid").write_text(f"{pid}\n")
        return folder

    stranger = Bystander.start(tmp_path / "stranger.log", new_session=True)
    folder = folder_for(stranger.proc.pid)
    try:
        out = subprocess.run(["sh", "-c", stop_script(_folder(str(folder)), 2.0)], capture_output=True, text=True)
        assert "stopped" in out.stdout and not folder.exists()
        assert stranger.signals() == []  # a process that reused the pid is not ours: left alone
    finally:
        stranger.end()

    worker = [sys.executable, "-c", "import time; time.sleep(60)", "-m", "primenb.serve.worker"]
    proc = subprocess.Popen(worker, start_new_session=True)
    folder = folder_for(proc.pid)
    out = subprocess.run(["sh", "-c", stop_script(str(folder), 2.0)], capture_output=True, text=True)
    assert "stopped" in out.stdout and not folder.exists()
    assert proc.wait(timeout=120) != 0  # the worker got SIGTERM


class FakeChannel:
    """The host's answers to `start` (one per script sent), and the scripts it was sent."""

    def __init__(self, *answers: str) -> None:
        self.answers, self.sent = list(answers), []  # type: list[str], list[str]

    def shell(self, script: str, timeout: float = 60.0) -> subprocess.CompletedProcess[bytes]:
        self.sent.append(script)
        out = self.answers.pop(0) if self.answers else "stopped\n"
        return subprocess.CompletedProcess(["sh"], 0, out.encode(), b"")

    def describe(self) -> str:
        return "box"


GOOD_DIR = "/tmp/primenb-serve.Ab12Cd34"


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (["no marker\n"], "starting the server on box failed"),
        (["primenb-serve-dir=/home/me; rm -rf ~\n"], "server folder"),
        (["primenb-serve-dir=/\n"], "server folder"),
        ([f"primenb-serve-dir={GOOD_DIR}\n", 'READY\n{"port": "8000", "pid": 4242}'], "port number"),
        ([f"primenb-serve-dir={GOOD_DIR}\n", 'READY\n{"port": 70000, "pid": 4242}'], "port number"),
        ([f"primenb-serve-dir={GOOD_DIR}\n", 'READY\n{"port": 8000, "pid": 1}'], "process id"),
        ([f"primenb-serve-dir={GOOD_DIR}\n", 'READY\n{"error": "bad\\u001b[31m thing"}'], "did not start: bad?"),
        ([f"primenb-serve-dir={GOOD_DIR}\n", "DEAD\nTraceback\x07 ModuleNotFoundError"], "exited at start"),
    ],
)
def test_hostile_host_answers_stop_the_start(answers: list[str], message: str, tmp_path: Path) -> None:
    host = SSHServeHost({"host": "box", "python": "/venv/bin/python"})
    fake = FakeChannel(*answers)
    host.channel = fake  # type: ignore[assignment]
    with pytest.raises(ServeHostError, match=re.escape(message)) as exc:
        host.start({"models": []}, bind="127.0.0.1", port=0, api_key_var=None, log=tmp_path / "f.log", timeout=5)
    assert "\x1b" not in str(exc.value) and "\x07" not in str(exc.value)
    started = len(answers) > 1
    # a folder the host named is cleaned up only when it is a mktemp folder; nothing else is ever sent
    assert len(fake.sent) == (3 if started else 1)
    if started:
        assert GOOD_DIR in fake.sent[-1] and "rm -rf" in fake.sent[-1]


def test_the_key_travels_on_stdin_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PNB_TEST_KEY", "s3cret-value")
    host = SSHServeHost({"host": "box", "env_names": ["PNB_TEST_KEY"]})
    fake = FakeChannel(f"primenb-serve-dir={GOOD_DIR}\n", 'READY\n{"port": 70000, "pid": 4242}')
    host.channel = fake  # type: ignore[assignment]
    with pytest.raises(ServeHostError):
        host.start({"models": []}, bind="0.0.0.0", port=0, api_key_var="PNB_TEST_KEY", log=tmp_path / "f", timeout=5)
    script = fake.sent[0]
    assert "export PNB_TEST_KEY=s3cret-value" in script  # an export in the script sent on stdin...
    spec_line = next(line for line in script.splitlines() if line.startswith("printf"))
    assert "s3cret-value" not in spec_line and '"api_key_var": "PNB_TEST_KEY"' in spec_line  # ...never the spec
    assert '"host": "127.0.0.1"' in spec_line  # the worker binds the host's loopback, whatever --host
