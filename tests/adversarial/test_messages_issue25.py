"""Issue 25 item 11: clear messages where a raw error or a wrong one was shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from primenb.backends.primecli import AuthError, PrimeCLI, classify, find_prime


def test_no_api_key_at_all_says_so_and_how_to_set_it() -> None:
    err = classify(
        "Error: No API key configured. Use command 'prime login' to configure your API \nkey.", 1, ["train", "models"]
    )
    assert isinstance(err, AuthError)
    text = str(err)
    assert "no Prime Intellect API key is set" in text and "PRIME_API_KEY" in text and "prime login" in text
    assert "401" not in text and "did not accept" not in text
    rejected = classify("Error: API key unauthorized (HTTP 401)", 1, ["train", "models"])
    assert "did not accept the API key (401)" in str(rejected)


def test_no_api_key_with_the_real_cli(tmp_path: Path) -> None:
    exe = find_prime()
    if exe is None:
        pytest.fail("the `prime` CLI is not installed: pip install 'prime==0.18.0' (the test extra)")
    cli = PrimeCLI(
        executable=exe,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PRIME_API_BASE_URL": "http://127.0.0.1:9"},
        retries=0,
    )
    with pytest.raises(AuthError, match="no Prime Intellect API key is set") as info:
        cli.json("train", "models", "-o", "json")
    assert "401" not in str(info.value)


def test_05_remote_without_the_stand_in_services_stops_with_a_clear_message(tmp_path: Path) -> None:
    """The notebook's set-up cell, run where the stand-in services are not: a SystemExit whose
    message says how to start them, not a FileNotFoundError traceback."""
    nb = json.loads((Path(__file__).resolve().parents[2] / "notebooks" / "05-remote.ipynb").read_text())
    cell = next("".join(c["source"]) for c in nb["cells"] if "services_env" in "".join(c["source"]))
    env = {"PRIMENB_SERVICES_DIR": str(tmp_path / "none"), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", cell], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )
    assert proc.returncode != 0
    assert "FileNotFoundError" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert ".ci/services.sh start" in proc.stderr
    assert not (tmp_path / "remote-python").exists()
