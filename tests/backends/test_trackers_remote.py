"""`[monitors.wandb]` on the remote backends: a tiny run over the real sshd and on the real SLURM
cluster (127.0.0.1, `.ci/services.sh start`) leaves W&B offline run files in its run directory,
and the SSH run brings them back with the trace; the Model Factory backend passes the table to the
platform in the submitted config, as upstream does. No W&B key anywhere: offline, no network."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from primenb import load_config
from primenb.backends.remote import read_remote
from tests.backends.conftest import forwarded_env, need_service, remote_python, sft_tiny
from tests.polling import wait_for
from tests.trackers.test_trackers import read_wandb, same

pytestmark = pytest.mark.slow  # real runs over a real sshd / SLURM

WANDB_TABLE = '\n[monitors.wandb]\nproject = "primenb-remote"\nname = "remote-wandb"\ntags = ["ci"]\n'
# W&B's settings, cache and data folders stay under the test's folder (the remote is this machine)
WANDB_DIRS = ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR")


@pytest.fixture
def wandb_env(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names to forward with env= (values from here), W&B's folders in tmp, no key."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    for name in WANDB_DIRS:
        monkeypatch.setenv(name, str(workdir / name.lower()))
    monkeypatch.setenv("WANDB_SILENT", "true")
    return [*forwarded_env(), *WANDB_DIRS, "WANDB_SILENT"]


def steps_of(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for k, v in row.items():
            if k not in ("step", "time", "phase", "nonfinite") and isinstance(v, int | float):
                out.setdefault(k, []).append((row["step"], float(v)))
    return out


def wandb_here(run_dir: Path) -> dict[str, Any]:
    """W&B's location in the trace, checked to be in this run directory, and its curves read back."""
    where = json.loads((run_dir / "trace.json").read_text())["trackers"]["wandb"]
    folder = Path(where["folder"])
    assert "url" not in where and folder.is_relative_to(run_dir / "trackers" / "wandb"), where
    want = steps_of(run_dir)
    assert want
    same(read_wandb(folder), want)
    return where


def test_ssh_wandb_offline_files_come_back_with_the_run(workdir, svc, ssh_url, wandb_env) -> None:
    from primenb.backends import submit
    from primenb.backends.spec import add

    options = [
        f"python={remote_python()}",
        f"ssh_args=-F {svc['PRIMENB_SSH_CONFIG']}",
        "env=" + ",".join(wandb_env),
        "connect_timeout=5",
    ]
    add("ci-wandb", ssh_url, options)
    (workdir / "sft.toml").write_text(sft_tiny(3, 3) + WANDB_TABLE)
    run = submit(load_config("sft.toml"), name="wandb-ssh", backend="ci-wandb")
    assert run.wait(timeout=600) == "completed", run.logs()
    wait_for(lambda: bool(read_remote(run.dir).get("fetched")), 120, "the artifacts")
    remote = read_remote(run.dir)["remote_dir"]
    # the W&B run was written on the host, in the remote run directory ...
    argv = ["ssh", "-F", svc["PRIMENB_SSH_CONFIG"], svc["PRIMENB_SSH_HOST"], f"ls {remote}/trackers/wandb"]
    listing = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    assert "offline-run-" in listing, listing
    # ... and came back: here, with the trace pointing at this copy, the same curves
    wandb_here(run.dir)
    assert list((run.dir / "trackers" / "wandb").glob("offline-run-*/run-*.wandb"))


def test_slurm_wandb_offline_files_are_in_the_run_directory(workdir, svc, wandb_env) -> None:
    from primenb.backends import submit
    from primenb.backends.spec import add

    if not svc.get("PRIMENB_SLURM"):
        need_service("the SLURM test cluster is not up (.ci/services.sh start writes PRIMENB_SLURM)")
    add("ci-slurm-wandb", "slurm://", [f"python={remote_python()}", "request_gpus=false", "env=" + ",".join(wandb_env)])
    slurm = '\n[slurm]\njob_name = "primenb-ci"\npartition = "debug"\n'
    (workdir / "sft.toml").write_text(sft_tiny(3, 3) + slurm + WANDB_TABLE)
    try:
        run = submit(load_config("sft.toml"), name="wandb-slurm", backend="ci-slurm-wandb")
        assert run.wait(timeout=600) == "completed", run.logs()
    finally:
        subprocess.run(["scancel", "--name=primenb-ci"], capture_output=True)
    wandb_here(run.dir)
