"""Issue 22, class "deny means deny on every backend and every path": a marker planted in the
private text (an environment that fails while loading quotes its row; the platform's rollouts and
logs quote prompts and completions) is found in no file written, no log and no server answer,
for the local, SSH and SLURM backends and the Model Factory stand-in."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.backends import test_modelfactory as hosted_tests
from tests.backends.conftest import need_service, remote_python, services
from tests.backends.fake_platform import FakePlatform
from tests.backends.test_modelfactory import HOSTED_RL, tick
from tests.tiny import sft_toml

platform = hosted_tests.platform  # the stand-in platform fixture, used here by name

pytestmark = pytest.mark.slow  # real engine starts (and real sshd / SLURM)

MARK = "PRIVATE-ROW-MARK-51c9e"
DENY = '[primenb.privacy]\ndata_collection = "deny"\n'

LOAD_FAILS = f'''
"""An environment whose loading fails with its first row in the message."""


def load_environment(**kwargs):
    rows = [{{"prompt": "{MARK} what is the secret?", "answer": "{MARK}"}}]
    raise ValueError(f"row 0 is malformed: {{rows[0]!r}}")
'''
LOAD_VARIANTS = {
    "load-raises": LOAD_FAILS,
    "key-error": f"def load_environment(**kw):\n    raise KeyError({{'prompt': '{MARK}'}})\n",
    "sys-exit": f"import sys\n\n\ndef load_environment(**kw):\n    sys.exit('{MARK} row 0')\n",
    "import-raises": f"raise RuntimeError('cannot open rows: {MARK}')\n",
}


def grep(roots: list[Path], needle: str = MARK) -> list[str]:
    hits = []
    for root in roots:
        for p in root.rglob("*") if root.is_dir() else []:
            if "-src" in p.parts[-2] or p.is_symlink() or not p.is_file():
                continue  # the planted environment's own source holds the marker
            if needle.encode() in p.read_bytes():
                hits.append(str(p))
    return hits


def server_answers() -> str:
    """What the sidebar's routes answer for every run (list, detail, samples)."""
    import primenb.harness as h
    from primenb.server import data

    h.reindex()  # the run's own trace is listed whatever the backend
    listed = data.list_traces(limit=500)
    assert listed["items"], listed  # every listed trace is read below (keys `items` and `trace`)
    out: list[Any] = [listed]
    for row in listed["items"]:
        out += [data.trace_detail(row["trace"]), data.samples(row["trace"], 50)]
    return json.dumps(out, default=str)


def _register(home: Path, source: str, env_id: str = "leakload") -> None:
    from primenb.envs import store

    folder = home.parent / f"{env_id}-src"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{env_id}.py").write_text(source)
    # `%prime_env add` would refuse an environment that does not load: write the entry it would
    store.save(store.Entry(id=env_id, kind="path", target=str(folder), version="0", description="", reward_funcs=[]))


def _config(env_id: str = "leakload") -> Any:
    from primenb.config import load_config

    return load_config(sft_toml(steps=2, env=env_id, model="primenb/tiny-byte-xs", batch_size=4, extra=DENY))


@pytest.mark.parametrize("source", list(LOAD_VARIANTS.values()), ids=list(LOAD_VARIANTS))
def test_deny_local_environment_failing_to_load_leaks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    import primenb.harness as h
    from primenb.backends import submit

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _register(tmp_path / "home", source)
    run = submit(_config(), name="deny-load")
    assert run.wait(timeout=600) == "failed", run.logs(50)
    assert "withheld" in run.status.get("error", ""), run.status
    h.reindex()
    assert grep([tmp_path]) == []
    assert MARK not in server_answers()


def test_deny_ssh_environment_failing_to_load_leaks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from primenb.backends import submit
    from primenb.backends.remote import read_remote
    from primenb.backends.spec import add

    svc = services()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _register(tmp_path / "home", LOAD_FAILS)
    folder = f"primenb-test-runs/{uuid.uuid4().hex[:8]}"
    ssh = ["ssh", "-F", svc["PRIMENB_SSH_CONFIG"], svc["PRIMENB_SSH_HOST"]]
    try:
        options = [f"python={remote_python()}", f"ssh_args=-F {svc['PRIMENB_SSH_CONFIG']}", "env=HF_HUB_OFFLINE"]
        add("deny-ssh", f"ssh://{svc['PRIMENB_SSH_HOST']}/~/{folder}", options)
        run = submit(_config(), name="deny-ssh", backend="deny-ssh")
        assert run.wait(timeout=600) == "failed", run.logs(50)
        assert "leakload" in run.status.get("error", "") and "withheld" in run.status["error"], run.status
        remote = read_remote(run.dir)["remote_dir"]
        found = subprocess.run(
            [*ssh, f"grep -rl --exclude-dir=envs {MARK} {remote} || true"], capture_output=True, text=True, timeout=60
        )
        assert found.stdout.strip() == "", found.stdout
        assert grep([tmp_path]) == []
        assert MARK not in server_answers()
    finally:
        subprocess.run([*ssh, f"rm -rf ~/{folder}"], capture_output=True, timeout=60)


def test_deny_slurm_environment_failing_to_load_leaks_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from primenb.backends import submit
    from primenb.backends.spec import add

    if not services().get("PRIMENB_SLURM"):
        need_service("the SLURM test cluster is not up (.ci/services.sh start writes PRIMENB_SLURM)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the job's PRIME_HOME is the remote side's (the wrapper): the environment is registered there
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home-remote"))
    _register(tmp_path / "home-remote", LOAD_FAILS)
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    _register(tmp_path / "home", LOAD_FAILS)
    add("deny-slurm", "slurm://", [f"python={remote_python()}", "request_gpus=false", "env=HF_HUB_OFFLINE"])
    text = sft_toml(steps=2, env="leakload", model="primenb/tiny-byte-xs", batch_size=4, extra=DENY)
    text += '\n[slurm]\njob_name = "primenb-ci"\npartition = "debug"\n'
    from primenb.config import load_config

    try:
        run = submit(load_config(text), name="deny-slurm", backend="deny-slurm")
        assert run.wait(timeout=600) == "failed", run.logs(50)
        assert "leakload" in run.status.get("error", "") and "withheld" in run.status["error"], run.status
        assert grep([tmp_path]) == []
        assert MARK not in server_answers()
    finally:
        subprocess.run(["scancel", "--name=primenb-ci"], capture_output=True)


def test_deny_model_factory_keeps_no_sample_or_log_text(platform: FakePlatform, tmp_path: Path) -> None:
    import primenb.harness as h
    from primenb.backends.modelfactory import ModelFactoryBackend
    from primenb.backends.primecli import PrimeCLI
    from primenb.config import load_config

    platform.text = MARK
    quotes: list[Any] = []
    mf = ModelFactoryBackend(cli=PrimeCLI(backoff=0.05), min_interval=1e9, confirm=lambda q: quotes.append(q) or True)
    run = mf.submit(load_config(HOSTED_RL + DENY), name="hosted-deny")
    assert "deny" in quotes[0].text() and "deny" in run.status["note"]  # it says what deny can and cannot do
    while tick(run)["state"] not in ("completed", "failed", "stopped"):
        pass
    assert run.status["state"] == "completed"
    rows = [json.loads(line) for line in (run.dir / "samples.jsonl").read_text().splitlines()]
    assert rows and all("prompt_hash" in r and "prompt" not in r for r in rows)
    assert "withheld" in (run.dir / "logs" / "trainer.log").read_text()
    h.reindex()
    assert grep([tmp_path, Path(os.environ["PRIME_HOME"])]) == []
    assert MARK not in server_answers()


def test_deny_marker_is_found_when_allowed(platform: FakePlatform) -> None:
    """The scan can fail: without deny the same platform answers do land in the run directory."""
    from primenb.backends.modelfactory import ModelFactoryBackend
    from primenb.backends.primecli import PrimeCLI
    from primenb.config import load_config

    platform.text = MARK
    mf = ModelFactoryBackend(cli=PrimeCLI(backoff=0.05), min_interval=1e9, yes=True)
    run = mf.submit(load_config(HOSTED_RL), name="hosted-allow")
    while tick(run)["state"] not in ("completed", "failed", "stopped"):
        pass
    assert grep([run.dir])
