"""A hosted (Model Factory) trace is served on this machine: `%prime_serve` fetches its latest
READY checkpoint the way `primenb.load` does (the fake platform and the real `prime` CLI 0.18.0)
and serves it locally; the `openai` client lists it and chats with it."""

from __future__ import annotations

import shutil
from pathlib import Path

import openai
import pytest

from primenb.config import load_config
from primenb.protocol.record import read_trace
from primenb.serve import client
from tests.backends.conftest import sft_tiny
from tests.backends.fake_platform import FakePlatform

# the hosted backend tests' fixture: the fake platform, the prime CLI's home and key
from tests.backends.test_modelfactory import HOSTED_RL, backend, tick
from tests.backends.test_modelfactory import platform as platform

pytestmark = pytest.mark.slow  # trains a tiny model (the checkpoint the platform "stores") and serves it


def test_hosted_trace_is_fetched_and_served_here(
    platform: FakePlatform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.backends import submit
    from primenb.backends.hosted_mirror import storage_root

    # a PRIME_HOME of its own: the hosted storage it fills is the session's otherwise, where the
    # hosted backend tests build their own step_N folders
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))

    # The checkpoint the platform will report READY: a real one of the same tiny base, trained here.
    local = submit(load_config(sft_tiny(1, 1)), name="stand-in")
    assert local.wait(timeout=300) == "completed", local.logs()
    ready = storage_root() / "step_4"
    shutil.copytree(local.checkpoints[-1], ready)

    run = backend(confirm=lambda q: True).submit(load_config(HOSTED_RL), name="hosted-a")
    for run_state in ("queued", "running", "completed"):
        assert tick(run)["state"] == run_state
    for r in platform.runs.values():
        r.storage = f"file://{storage_root()}/step_{{step}}"
    trace = read_trace(run.dir)
    assert trace is not None and not (run.dir / "checkpoints" / "step_4").exists()

    srv = client.start([trace["trace_id"]])
    try:
        assert srv.remote is None  # served on this machine
        assert (run.dir / "checkpoints" / "step_4" / "config.json").exists()  # fetched as load does
        c = openai.OpenAI(base_url=srv.url, api_key="unused")
        served = f"{trace['model']['id']}-ft-hosted-a"  # the stand-in checkpoint is a full model
        assert served in [m.id for m in c.models.list()]
        chat = c.chat.completions.create(
            model=served, messages=[{"role": "user", "content": "hi"}], max_tokens=4, temperature=0
        )
        assert chat.usage is not None and chat.usage.completion_tokens >= 1
    finally:
        srv.stop()
    assert client.servers() == []
