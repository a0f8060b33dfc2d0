"""The SLURM backend against the real single-node cluster on 127.0.0.1 (`.ci/services.sh start`)."""

from __future__ import annotations

import subprocess
import time

import pytest

from primenb import load_config
from primenb.backends import attach, submit
from primenb.backends.remote import read_remote
from primenb.backends.spec import add
from tests.backends.conftest import forwarded_env, need_service, remote_python, sft_tiny
from tests.polling import wait_for

pytestmark = pytest.mark.slow  # real runs on a real SLURM cluster


@pytest.fixture
def slurm(svc, workdir):
    if not svc.get("PRIMENB_SLURM"):
        need_service("the SLURM test cluster is not up (.ci/services.sh start writes PRIMENB_SLURM)")
    # The cluster shares this machine's filesystem and (sbatch --export=ALL) environment.
    add("ci-slurm", "slurm://", [f"python={remote_python()}", "request_gpus=false", "env=" + ",".join(forwarded_env())])
    yield "ci-slurm"
    subprocess.run(["scancel", "--name=primenb-ci"], capture_output=True)


def _config(steps: int, ckpt: int, extra: str = "") -> str:
    return sft_tiny(steps, ckpt) + '\n[slurm]\njob_name = "primenb-ci"\npartition = "debug"\n' + extra


def test_slurm_two_ranks_go_pending_running_completed(workdir, slurm):
    """A job held until a begin time is PENDING (with SLURM's reason), then RUNNING with two
    ranks on the one node, then COMPLETED with every metric."""
    add(
        "ci-slurm-later",
        "slurm://",
        [
            f"python={remote_python()}",
            "request_gpus=false",
            "env=" + ",".join(forwarded_env()),
            "sbatch_args=--begin=now+6",
        ],
    )
    two = "[deployment]\nnum_train_gpus = 2\n"
    (workdir / "sft.toml").write_text(_config(6, 6, two))
    run = submit(load_config("sft.toml"), name="states", backend="ci-slurm-later")
    assert (run.dir / "slurm.sh").exists() and "--num_processes 2" in (run.dir / "slurm.sh").read_text()
    states, reasons = [], set()
    while True:  # record the state each poll sees, the final one included
        st = run.refresh()
        if not states or states[-1] != st["state"]:
            states.append(st["state"])
        reasons.add((st.get("slurm") or {}).get("reason"))
        if st["state"] in ("completed", "failed", "stopped"):
            break
        time.sleep(0.5)
        assert len(states) < 10
    assert states == ["queued", "running", "completed"], (states, run.logs())
    assert "BeginTime" in reasons
    assert [r["step"] for r in run.metric_rows() if "loss" in r] == list(range(1, 7))
    assert "2 rank(s)" in run.logs(200)


def test_slurm_stop_and_scancel_end_stopped_with_a_final_checkpoint(workdir, slurm):
    (workdir / "sft.toml").write_text(_config(100000, 100000))
    run = submit(load_config("sft.toml"), name="stop", backend=slurm)
    other = submit(load_config("sft.toml"), name="cancel", backend=slurm)
    for r in (run, other):
        wait_for(lambda r=r: len(r.metric_rows()) >= 2 or r.done, 240, f"metrics of {r.name}")
    assert run.stop(timeout=120) == "stopped", run.logs()
    assert run.checkpoints, run.logs()
    job = read_remote(other.dir)["job_id"]
    subprocess.run(["scancel", job], check=True)
    restarted = attach("cancel")  # as after a kernel restart
    assert restarted.wait(timeout=120) == "stopped", restarted.logs()
    assert restarted.checkpoints, restarted.logs()


def test_slurm_failing_pre_run_command_ends_failed_with_the_log_tail(workdir, slurm):
    (workdir / "sft.toml").write_text(
        _config(2, 2, "").replace(
            'partition = "debug"', 'partition = "debug"\npre_run_command = "echo preparing; ls /no/such/dir"'
        )
    )
    run = submit(load_config("sft.toml"), name="pre", backend=slurm)
    assert run.wait(timeout=120) == "failed"
    st = run.status
    assert "ended FAILED" in st["error"] and any("/no/such/dir" in line for line in st["log_tail"]), st
    assert "preparing" in run.logs()


def test_sbatch_rejecting_a_job_is_a_failed_state(workdir, slurm):
    (workdir / "sft.toml").write_text(_config(2, 2).replace('partition = "debug"', 'partition = "nosuch"'))
    run = submit(load_config("sft.toml"), name="rejected", backend=slurm)
    assert run.state == "failed" and "sbatch rejected the job" in run.status["error"]
    assert "partition" in run.status["error"].lower()


def test_slurm_trains_a_multi_turn_taskset_on_verifiers_episodes(workdir, slurm):
    """A SLURM job runs the same engine: verifiers' episodes (the built-in reverse-turns, its own
    Env, harness null, runtime subprocess) against the policy served inside the job."""
    from tests.tiny import episode_toml

    toml = episode_toml(
        "reverse-turns", "num_tasks = 50\n", max_turns=4, steps=1, seq_len=256, max_tokens=8, batch_size=4, group_size=2
    )
    (workdir / "rl.toml").write_text(toml + '\n[slurm]\njob_name = "primenb-ci"\npartition = "debug"\n')
    run = submit(load_config("rl.toml"), name="episodes-slurm", backend=slurm)
    assert run.wait(timeout=600) == "completed", run.logs(200)
    rows = [r for r in run.metric_rows() if "reward" in r]
    assert len(rows) == 1 and rows[0]["episodes/turns"] == 2.0 and rows[0]["episodes/failed"] == 0.0, rows
    assert read_remote(run.dir)["job_id"]  # it ran as a SLURM job
