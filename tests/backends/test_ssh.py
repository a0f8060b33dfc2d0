"""The SSH backend against the real sshd on 127.0.0.1 (`.ci/services.sh start`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from primenb import load_config
from primenb.backends.remote import read_remote
from primenb.backends.sshconn import SSHConnection
from tests.backends.conftest import services_script, sft_tiny
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # real runs over a real sshd


def _remote_metrics(run_dir: Path, svc: dict[str, str]) -> bytes:
    remote = read_remote(run_dir)["remote_dir"]
    argv = ["ssh", "-F", svc["PRIMENB_SSH_CONFIG"], svc["PRIMENB_SSH_HOST"], f"cat {remote}/metrics.jsonl"]
    return subprocess.run(argv, capture_output=True, check=True, timeout=30).stdout


CUT_STEPS = 300


def test_ssh_run_survives_a_cut_reattaches_and_brings_artifacts_back(shell, workdir, svc, ssh_url, ssh_options):
    """A tiny run on the host: metrics in the monitor, the connection cut mid-run (control master
    killed, sshd down for a few seconds) while it keeps training, every step after reconnecting,
    re-attached as after a kernel restart, the final checkpoint back and loadable."""
    # long enough to outlast the 5 s cut on a quiet machine (a tiny step takes tens of ms)
    (workdir / "sft.toml").write_text(sft_tiny(CUT_STEPS, CUT_STEPS // 2))
    assert shell.run_cell(f"%prime_backend add ci {ssh_url} " + " ".join(f"'{o}'" for o in ssh_options)).success
    result = shell.run_cell("run = %prime_train sft.toml --name cut --backend ci")
    assert result.success, result.error_in_exec
    run = shell.user_ns["run"]
    assert run.status["backend"] == "ssh" and read_remote(run.dir)["remote_dir"].endswith("/cut")
    wait_for(lambda: len(run.metric_rows()) >= 3 or run.done, 240, "the first metrics over ssh")
    assert not run.done, run.logs()

    # Cut: kill the control master and keep sshd down; the run trains on regardless.
    conn = SSHConnection.to(run._control.channel.conn.target)
    pid = conn.master_pid()
    assert pid
    services_script(svc, "sshd-stop")
    try:
        os.kill(pid, signal.SIGKILL)
        seen = len(run.metric_rows())
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            assert run.state == "running"  # a cut never ends the run nor blocks
            time.sleep(0.5)
        assert run.status.get("connection", {}).get("ok") is False
    finally:
        services_script(svc, "sshd-start")

    # A "kernel restart": a new Run from the run directory alone, through the magic.
    shell.user_ns.pop("run")
    assert shell.run_cell("again = %prime_train --attach cut").success
    again = shell.user_ns["again"]
    assert again.wait(timeout=300) == "completed", again.logs()
    steps = [r["step"] for r in again.metric_rows() if "loss" in r]
    assert steps == list(range(1, CUT_STEPS + 1))
    assert len(again.metric_rows()) > seen
    assert (again.dir / "metrics.jsonl").read_bytes() == _remote_metrics(again.dir, svc)  # byte for byte

    # Artifacts: final checkpoint and a trace pointing here, loadable.
    wait_for(lambda: (again.status and read_remote(again.dir).get("fetched")) or False, 60, "the artifacts")
    assert [p.name for p in again.checkpoints] == [f"step_{CUT_STEPS}"]
    trace = json.loads((again.dir / "trace.json").read_text())
    assert trace["status"] == "completed" and trace["backend"] == "ssh"
    assert trace["final"]["path"] == str(again.dir / "checkpoints" / f"step_{CUT_STEPS}")
    import primenb

    model, _tok = primenb.load(trace["trace_id"])
    assert sum(p.numel() for p in model.parameters()) > 0


def test_ssh_stop_ends_stopped_with_a_final_checkpoint_here(workdir, svc, ssh_url, ssh_options):
    from primenb.backends import submit
    from primenb.backends.spec import add

    add("ci", ssh_url, ssh_options)
    (workdir / "sft.toml").write_text(sft_tiny(100000, 100000))
    run = submit(load_config("sft.toml"), name="stopme", backend="ci")
    wait_for(lambda: len(run.metric_rows()) >= 2 or run.done, 240, "metrics")
    assert run.stop(timeout=120) == "stopped", run.logs()
    wait_for(lambda: bool(run.status) and bool(read_remote(run.dir).get("fetched")), 60, "the artifacts")
    assert run.checkpoints and run.checkpoints[-1].name.startswith("step_"), run.logs()
    assert json.loads((run.dir / "trace.json").read_text())["status"] == "stopped"


def test_ssh_trains_a_multi_turn_taskset_on_verifiers_episodes(workdir, svc, ssh_url, ssh_options):
    """The host runs the same engine: verifiers' episodes (the built-in reverse-turns, its own
    Env, harness null, runtime subprocess) against the policy served inside the run, there."""
    from primenb.backends import submit
    from primenb.backends.spec import add
    from tests.tiny import episode_toml

    add("ci", ssh_url, ssh_options)
    toml = episode_toml(
        "reverse-turns", "num_tasks = 50\n", max_turns=4, steps=1, seq_len=256, max_tokens=8, batch_size=4, group_size=2
    )
    run = submit(load_config(toml), name="episodes-ssh", backend="ci")
    assert run.wait(timeout=600) == "completed", run.logs(200)
    rows = [r for r in run.metric_rows() if "reward" in r]
    assert len(rows) == 1 and rows[0]["episodes/turns"] == 2.0 and rows[0]["episodes/failed"] == 0.0, rows


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unreachable-host", "unreachable"),
        ("refused-key", "refused our key"),
        ("missing-python", "has no Python at '/no/such/python'"),
        ("missing-primenb", "primenb is not installed"),
    ],
)
def test_ssh_failures_are_states_with_a_message(workdir, svc, ssh_options, case, message):
    from primenb.backends import submit
    from primenb.backends.spec import add

    url = f"ssh://{svc['PRIMENB_SSH_HOST']}/~/x"
    options = [*ssh_options, "connect_timeout=3"]
    if case == "unreachable-host":
        url = "ssh://root@127.0.0.1:1/~/x"  # nothing listens on port 1
        options = [o for o in options if not o.startswith("ssh_args=")]
    elif case == "refused-key":  # the services' sshd, a key it does not know
        url = f"ssh://root@127.0.0.1:{svc['PRIMENB_SSH_PORT']}/~/x"
        options = [o for o in options if not o.startswith("ssh_args=")]
        options.append(
            "ssh_args=-o IdentitiesOnly=yes -o IdentityFile=/nonexistent -o StrictHostKeyChecking=no "
            "-o UserKnownHostsFile=/dev/null"
        )
    elif case == "missing-python":
        options.append("python=/no/such/python")
    else:
        options.append("python=/usr/bin/python3")  # a Python without primenb
    add("bad", url, options)
    (workdir / "sft.toml").write_text(sft_tiny(2, 2))
    t0 = time.monotonic()
    run = submit(load_config("sft.toml"), backend="bad")
    assert time.monotonic() - t0 < 30  # never a hang
    assert run.state == "failed"
    assert message in run.status["error"], run.status["error"]
    if case == "missing-primenb":
        assert "-m pip install 'primenb==" in run.status["error"]


def test_the_cli_lists_saved_backends(workdir):
    env = {**os.environ, "PRIME_HOME": str(workdir / "home")}
    cli = [sys.executable, "-m", "primenb.cli"]
    subprocess.run([*cli, "backend", "add", "box", "ssh://me@box", "python=/v/bin/python"], check=True, env=env)
    out = subprocess.run([*cli, "backend", "list"], check=True, env=env, capture_output=True, text=True).stdout
    assert out.split() == ["name", "url", "box", "ssh://me@box"]  # a header, then one row per backend
    shown = json.loads(subprocess.run([*cli, "backend", "show", "box"], env=env, capture_output=True, text=True).stdout)
    assert shown["python"] == "/v/bin/python"
    subprocess.run([*cli, "backend", "remove", "box"], check=True, env=env)
    assert subprocess.run([*cli, "backend", "list"], env=env, capture_output=True, text=True).stdout.split() == [
        "name",
        "url",
    ]
