"""Fixtures for the backend tests: the real sshd and single-node SLURM that `.ci/services.sh start`
brings up on 127.0.0.1. Without them a test skips, except under CI=true, where it fails."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tiny import sft_toml

ROOT = Path(__file__).resolve().parents[2]
SERVICES_ENV = Path(os.environ.get("PRIMENB_SERVICES_DIR", "/tmp/primenb-services")) / "services.env"


def sft_tiny(steps: int, ckpt: int) -> str:
    """The smallest SFT run (tests/tiny.py's builder): samples off, a metrics row per step."""
    return sft_toml(
        steps=steps,
        model="primenb/tiny-byte-xs",
        batch_size=8,
        seq_len=48,
        ckpt_interval=ckpt,
        primenb="seed = 1\nlogging_steps = 1\nsample_every = 1000",
    )


def need_service(why: str) -> None:
    """A backend test service is missing: skip on a developer machine, fail under CI=true or
    PRIMENB_REQUIRE_SERVICES=1 (`.ci/run` sets it and starts every service, so a missing one is a
    broken set-up, not a reason to skip)."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes") or os.environ.get("PRIMENB_REQUIRE_SERVICES") == "1":
        pytest.fail(f"CI=true or PRIMENB_REQUIRE_SERVICES=1 but {why}")
    pytest.skip(why)  # only off CI: sshd/SLURM need root and `.ci/services.sh start`, which CI always runs


def services() -> dict[str, str]:
    if not SERVICES_ENV.exists():
        need_service(f"the sshd/SLURM test services are not running: run `.ci/services.sh start` ({SERVICES_ENV})")
    out = {}
    for line in SERVICES_ENV.read_text().splitlines():
        key, _, value = line.partition("=")
        out[key.strip()] = value.strip()
    return out


# What the remote side needs to run *this* checkout offline. env= forwards names only (values are
# never saved), so the values that differ on the "remote" side (its own PRIME_HOME) are set by a
# small wrapper used as the remote Python, written next to PRIME_HOME for each test.
def remote_python() -> str:
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    home = os.environ["PRIME_HOME"]
    wrapper = Path(home).parent / "remote-python"
    if not wrapper.exists():
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            "#!/bin/sh",
            f"export PYTHONPATH={shlex.quote(pythonpath)}",
            "export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1",
            # a run-private home set by the launch script (local environments) stays; the test's own
            # (inherited by sbatch) or none becomes the remote side's
            f'case "${{PRIME_HOME:-}}" in ""|{shlex.quote(home)}) export PRIME_HOME={shlex.quote(home + "-remote")};; esac',
            f'exec {shlex.quote(sys.executable)} "$@"',
        ]
        wrapper.write_text("\n".join(lines) + "\n")
        wrapper.chmod(0o755)
    return str(wrapper)


def forwarded_env() -> list[str]:
    """The names forwarded with env= (their values are this process's). A CA bundle this machine
    sets goes too: the package index is reached through it, and the host's uv (verifiers' chat
    program for episode runs) trusts only its own roots otherwise."""
    return ["HF_HUB_OFFLINE", "TOKENIZERS_PARALLELISM", *(["SSL_CERT_FILE"] if os.environ.get("SSL_CERT_FILE") else [])]


@pytest.fixture
def svc() -> dict[str, str]:
    return services()


@pytest.fixture
def ssh_url(svc: dict[str, str]) -> Iterator[str]:
    """A fresh remote workdir per test, removed after it."""
    folder = f"primenb-test-runs/{uuid.uuid4().hex[:8]}"
    yield f"ssh://{svc['PRIMENB_SSH_HOST']}/~/{folder}"
    argv = ["ssh", "-F", svc["PRIMENB_SSH_CONFIG"], svc["PRIMENB_SSH_HOST"], f"rm -rf ~/{folder}"]
    subprocess.run(argv, capture_output=True, timeout=60)


@pytest.fixture
def ssh_options(svc: dict[str, str]) -> list[str]:
    return [
        f"python={remote_python()}",
        f"ssh_args=-F {svc['PRIMENB_SSH_CONFIG']}",
        "env=" + ",".join(forwarded_env()),
        "connect_timeout=5",
    ]


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    return tmp_path


def services_script(svc: dict[str, str], action: str) -> None:
    subprocess.run([svc["PRIMENB_SERVICES_SCRIPT"], action], check=True, timeout=60)
