"""Serving a trace where it trained: a tiny SFT run over the real sshd on 127.0.0.1
(`.ci/services.sh start`), served on that "host" (its own work dir and PRIME_HOME, its own Python
wrapper) and reached through a forwarded local port with the `openai` client."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from primenb.backends.remote import read_remote
from primenb.backends.ssh_serve import forward_running
from primenb.serve import client, registry
from tests.backends.conftest import sft_tiny

# the backend tests' fixtures (sshd on 127.0.0.1, a fresh remote work dir, the remote Python)
from tests.backends.conftest import ssh_options as ssh_options
from tests.backends.conftest import ssh_url as ssh_url
from tests.backends.conftest import svc as svc
from tests.backends.conftest import workdir as workdir
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # a real run over ssh, then a server process on the "host"

MODEL = "primenb/tiny-byte-xs-ft-far"  # a full fine-tune (the run trains no LoRA)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    return state != "Z"


def _serve_dirs() -> set[str]:
    """The host's server folders (``mktemp -d`` under its TMPDIR: this machine's /tmp here, which
    other processes share: the checks are that no new folder stays, and the served one goes)."""
    return {str(p) for p in Path(os.environ.get("TMPDIR") or "/tmp").glob("primenb-serve.*")}


def _remote_records() -> list[Path]:
    folder = Path(os.environ["PRIME_HOME"] + "-remote") / "serve"  # the host's PRIME_HOME (remote_python)
    return [p for p in folder.glob("*.json") if p.stem.isdigit()] if folder.is_dir() else []


@pytest.fixture
def stop_all_after() -> Iterator[None]:
    """A failing test leaves no server running, here or on the host."""
    yield
    for s in client.servers(revive=False):
        s.stop()


def test_ssh_trace_is_served_on_its_host_through_a_forwarded_port(
    shell, workdir, svc, ssh_url, ssh_options, stop_all_after
):
    from primenb import load_config
    from primenb.backends import submit
    from primenb.backends.spec import add

    add("ci", ssh_url, ssh_options)
    far = submit(load_config(sft_tiny(3, 3)), name="far", backend="ci")
    assert far.wait(timeout=300) == "completed", far.logs()
    wait_for(lambda: bool(read_remote(far.dir).get("fetched")), 60, "the artifacts")
    # The checkpoint this machine fetched is removed: what serves is the host's own copy.
    shutil.rmtree(far.dir / "checkpoints")

    before = _serve_dirs()
    with socket.socket() as busy:  # a local port in use: refused, and nothing stays on the host
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        taken = shell.run_cell(f"%prime_serve far --port {busy.getsockname()[1]}")
    assert not taken.success and "pick another --port" in str(taken.error_in_exec)
    assert not _serve_dirs() - before and _remote_records() == [] and client.servers() == []

    result = shell.run_cell("srv = %prime_serve far")
    assert result.success, result.error_in_exec
    srv = shell.user_ns["srv"]
    assert srv.url.startswith("http://127.0.0.1:") and srv.url.endswith("/v1") and srv.remote is not None
    remote_pid, remote_dir = srv.remote["pid"], srv.remote["dir"]
    assert _alive(remote_pid) and _alive(srv.pid) and forward_running(srv.pid, srv.remote["forward"])
    cmdline = Path(f"/proc/{remote_pid}/cmdline").read_bytes()
    assert b"primenb.serve.worker" in cmdline  # started by the host's Python over ssh
    assert Path(remote_dir, "spec.json").is_file() and str(far.dir) not in Path(remote_dir, "spec.json").read_text()
    assert len(_remote_records()) == 1  # the worker recorded itself on the host, not here

    c = openai.OpenAI(base_url=srv.url, api_key="unused")
    ids = [m.id for m in c.models.list()]
    assert ids == ["primenb/tiny-byte-xs", MODEL]
    chat = c.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}], max_tokens=6, temperature=0
    )
    assert chat.choices[0].finish_reason in ("stop", "length") and chat.usage is not None
    assert chat.usage.completion_tokens >= 1

    listed = shell.run_cell("%prime_serve list")
    assert listed.success, listed.error_in_exec
    table = listed.result
    assert list(table["url"]) == [srv.url] and table["requests"][0] >= 1 and "primenb-ci" in table["where"][0]

    # The forward dies (a cut connection, a laptop asleep): the next look at the servers renews it.
    os.kill(srv.pid, signal.SIGKILL)
    wait_for(lambda: not forward_running(srv.pid, srv.remote["forward"]), 120, "the forward to end")
    (renewed,) = client.servers()
    assert renewed.pid != srv.pid and forward_running(renewed.pid, renewed.remote["forward"])
    assert renewed.remote["dir"] == remote_dir and renewed.url == srv.url  # its port was free again
    chat = openai.OpenAI(base_url=renewed.url, api_key="unused").completions.create(
        model=MODEL, prompt="hello=", max_tokens=4, temperature=0
    )
    assert chat.choices[0].text is not None

    again = shell.run_cell("%prime_serve add far")  # same host: accepted, and already served
    assert not again.success and "already serves far" in str(again.error_in_exec)

    # Another process (a terminal, a restarted kernel) finds it in the registry and stops it:
    # the worker and its folder on the host, the forward here.
    cli = subprocess.run(
        [sys.executable, "-m", "primenb.cli", "serve", "stop", srv.url], capture_output=True, text=True, timeout=120
    )
    assert cli.returncode == 0 and srv.url in cli.stdout, cli.stderr
    wait_for(lambda: not _alive(remote_pid), 120, "the remote worker to end")
    assert not Path(remote_dir).exists()
    assert not forward_running(renewed.pid, renewed.remote["forward"]) and not _alive(renewed.pid)
    assert registry.records() == [] and _remote_records() == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert renewed.remote["forward"] not in ps and remote_dir not in ps

    # The host's checkpoint deleted: a clear error, and again nothing stays there.
    shutil.rmtree(read_remote(far.dir)["remote_dir"] + "/checkpoints")
    gone = shell.run_cell("%prime_serve far")
    assert not gone.success and "does not exist" in str(gone.error_in_exec)
    assert not _serve_dirs() - before and _remote_records() == [] and registry.records() == []
