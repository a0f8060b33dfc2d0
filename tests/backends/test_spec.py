"""Backend URLs, the named-backend store, backend choice, and the SLURM script (no services)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primenb import load_config
from primenb.backends import default_backend, get_backend
from primenb.backends.slurm import SlurmBackend
from primenb.backends.slurm_script import batch_script, layout
from primenb.backends.spec import BackendSpecError, add, list_specs, parse_url, remove, resolve
from primenb.backends.ssh import SSHBackend, env_exports, remote_workdir


def test_urls_parse_into_specs() -> None:
    s = parse_url("ssh://alice@gpu-box:2200/~/runs")
    assert (s.kind, s.user, s.host, s.port, s.workdir) == ("ssh", "alice", "gpu-box", 2200, "runs")
    assert s.url == "ssh://alice@gpu-box:2200/~/runs"
    assert parse_url("ssh://gpu-box/scratch/me").workdir == "/scratch/me"
    assert parse_url("slurm://").host is None and parse_url("slurm://login1").host == "login1"
    with pytest.raises(BackendSpecError, match="names no host"):
        parse_url("ssh://")
    with pytest.raises(BackendSpecError, match="not a backend URL"):
        parse_url("ftp://x")
    assert remote_workdir("runs", "/home/a") == "/home/a/runs"
    assert remote_workdir("~/x", "/home/a") == "/home/a/x"
    assert remote_workdir(None, "/home/a") == "/home/a/primenb-runs"


def test_named_backends_are_saved_without_secret_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRIME_HOME", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN", "hf_supersecret")
    monkeypatch.setenv("MODE", "fast")
    spec = add("box", "ssh://me@box:2222", ["python=/opt/venv/bin/python", "env=HF_TOKEN,MODE", "ssh_args=-F cfg"])
    saved = (tmp_path / "backends" / "box.json").read_text()
    assert "hf_supersecret" not in saved and json.loads(saved)["env"] == ["HF_TOKEN", "MODE"]
    assert [s.name for s in list_specs()] == ["box"]
    backend = get_backend("box")
    assert isinstance(backend, SSHBackend) and backend.spec.python == "/opt/venv/bin/python"
    assert backend.spec.ssh_args == ["-F", "cfg"] and spec.port == 2222
    exports, missing = env_exports([*backend.spec.env, "NOT_SET_ANYWHERE"])
    assert exports.splitlines() == ["export HF_TOKEN=hf_supersecret", "export MODE=fast"]
    assert missing == ["NOT_SET_ANYWHERE"]
    with pytest.raises(BackendSpecError, match="exists"):
        add("box", "ssh://other")
    with pytest.raises(BackendSpecError, match="cannot name"):
        add("ssh", "ssh://other")
    with pytest.raises(BackendSpecError, match="bad option"):
        add("x", "ssh://other", ["colour=red"])
    with pytest.raises(BackendSpecError, match=r"names only.*write env=HF_TOKEN"):
        add("leaky", "ssh://other", ["env=HF_TOKEN=hf_supersecret"])
    assert not (tmp_path / "backends" / "leaky.json").exists()
    assert isinstance(get_backend("slurm://"), SlurmBackend)
    remove("box")
    with pytest.raises(BackendSpecError, match="no backend named 'box'"):
        resolve("box")


SFT = """max_steps = 10
[model]
name = "primenb/tiny-byte-xs"
[data]
name = "reverse-text"
"""


def test_a_slurm_table_sends_the_run_to_slurm_unless_a_backend_is_written() -> None:
    assert default_backend(load_config(SFT)) == "local"
    assert default_backend(load_config(SFT + "[slurm]\npartition = 'gpu'\n")) == "slurm"
    both = SFT + "[slurm]\npartition = 'gpu'\n[primenb]\nbackend = 'local'\n"
    assert default_backend(load_config(both)) == "local"
    assert default_backend(load_config(SFT + "[primenb]\nbackend = 'ssh://box'\n")) == "ssh://box"


MULTI = """max_steps = 10
[model]
name = "primenb/tiny-byte-xs"
[data]
name = "reverse-text"
[deployment]
type = "multi_node"
num_train_nodes = 2
gpus_per_node = 8
[slurm]
job_name = "big-sft"
partition = "h100"
account = "lab"
time = "04:00:00"
nodelist = "n[01-02]"
exclude = "n07"
pre_run_command = "module load cuda/12.4"
[run]
name = "big"
"""


def test_the_two_node_eight_gpu_script_line_by_line() -> None:
    config = load_config(MULTI)
    assert layout(config).nodes == 2 and layout(config).world == 16
    lines = batch_script(config, "/shared/runs/big", python="/opt/venv/bin/python").splitlines()
    assert lines == [
        "#!/bin/bash",
        "#SBATCH --job-name=big-sft",
        "#SBATCH --partition=h100",
        "#SBATCH --nodes=2",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --gpus-per-node=8",
        "#SBATCH --account=lab",
        "#SBATCH --time=04:00:00",
        "#SBATCH --nodelist=n[01-02]",
        "#SBATCH --exclude=n07",
        "#SBATCH --output=/shared/runs/big/logs/launcher.log",
        "#SBATCH --open-mode=append",
        "# primenb run big: 2 node(s) x 8 process(es); by hand: sbatch THIS_FILE",
        "set -euo pipefail",
        "export PYTHONUNBUFFERED=1",
        "module load cuda/12.4",
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))",
        "srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c 'exec /opt/venv/bin/python -m "
        'accelerate.commands.launch --multi_gpu --num_machines 2 --num_processes 16 --machine_rank "$SLURM_NODEID" '
        '--main_process_ip "$MASTER_ADDR" --main_process_port "$MASTER_PORT" --rdzv_backend static --same_network '
        "--mixed_precision no --dynamo_backend no -m primenb.engine /shared/runs/big'",
    ]


def test_a_single_process_script_runs_the_engine_directly_and_can_skip_gpus() -> None:
    text = batch_script(load_config(SFT), "/r/one", request_gpus=False)
    assert "--gpus-per-node" not in text and "#SBATCH --partition=cluster" in text
    assert text.splitlines()[-1].endswith("bash -c 'exec python3 -m primenb.engine /r/one'")
