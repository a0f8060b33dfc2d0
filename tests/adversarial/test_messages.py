"""Item 13 (messages instead of tracebacks) and the smaller items of 14 on the faces."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from primenb.errors import PrimenbError
from primenb.protocol.liveness import launch_record
from tests.adversarial.conftest import rl_text, tree


@pytest.mark.parametrize("kind", ["file", "devnull"])
def test_item13_output_dir_that_cannot_hold_runs(home: Path, kind: str) -> None:
    from primenb.backends.local import prepare
    from primenb.config import load_config

    if kind == "file":
        (home / "outputs").write_text("not a folder")
        out = "outputs"
    else:
        out = "/dev/null"
    config = load_config(rl_text(max_steps=2, output_dir=f'"{out}"'))
    with pytest.raises(PrimenbError, match="cannot create the run directory"):
        prepare(config, name="r")
    if kind == "file":
        assert (home / "outputs").read_text() == "not a folder"


def test_item13_magic_messages(home: Path, shell) -> None:  # type: ignore[no-untyped-def]
    from primenb.notebook.magics import MagicFailed

    (home / "adir").mkdir()
    with pytest.raises(MagicFailed, match="is a folder"):
        shell.run_cell_magic("rltoml", "cfg --save adir", rl_text())
    assert list((home / "adir").iterdir()) == []
    for line in ['cfg --name "unbalanced', "cfg --name 'x"]:
        with pytest.raises(MagicFailed, match="cannot read the arguments"):
            shell.run_line_magic("prime_train", line)
    with pytest.raises(MagicFailed, match="cannot read the arguments"):
        shell.run_line_magic("prime_harness", 'show "x')
    with pytest.raises(MagicFailed, match="cannot read the arguments"):
        shell.run_line_magic("prime_env", 'show "x')


def _run_dir(home: Path) -> Path:
    dead = subprocess.Popen(["true"], start_new_session=True)
    record = launch_record(dead.pid)
    dead.wait()
    run = home / "outputs" / "r"
    (run / "configs").mkdir(parents=True)
    (run / "configs" / "resolved.json").write_text("{}")
    (run / "launcher.json").write_text(json.dumps(record))
    return run


@pytest.mark.parametrize("status", [None, b"\xff\xfe\x00garbage", b"[1, 2]", b'{"state": "running", "step": 4'])
def test_item13_missing_or_broken_status_ends_attach(home: Path, status: bytes | None, capsys) -> None:  # type: ignore[no-untyped-def]
    from primenb.render.progress import follow
    from primenb.run import Run

    run = _run_dir(home)
    if status is not None:
        (run / "status.json").write_bytes(status)
    (run / "metrics.jsonl").write_text('{"step": 4, "loss": 1.0}\n')
    assert follow(Run(run), every=0) == 1  # ends (failed), does not loop printing step 4/?
    assert "failed" in capsys.readouterr().out


def test_item13_odd_metrics_lines(home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from primenb.protocol.record import metrics_summary
    from primenb.protocol.rundir import read_metrics
    from primenb.render.progress import follow
    from primenb.run import Run

    run = _run_dir(home)
    (run / "status.json").write_text(json.dumps({"state": "completed", "step": 3, "max_steps": 3}))
    (run / "metrics.jsonl").write_text(
        '1\n"text"\n[1, 2]\nnull\n{"no_step": 1}\n{"step": "2", "loss": 1}\n'
        '{"step": 1, "loss": "high", "reward": 0.5}\n{"step": 2, "loss": 0.7, "reward": [1]}\n\xff\n'
    )
    rows = read_metrics(run / "metrics.jsonl")
    assert rows == [{"step": 1, "reward": 0.5}, {"step": 2, "loss": 0.7}]
    df = Run(run).metrics
    assert list(df["step"]) == [1, 2] and df["reward"].iloc[0] == 0.5 and df["reward"].isna().iloc[1]
    assert metrics_summary(rows)["final"] == {"reward": 0.5, "loss": 0.7}
    assert follow(Run(run), every=0) == 0
    assert "step 3/3" in capsys.readouterr().out


def test_item13_environment_calling_sys_exit(home: Path) -> None:
    from primenb.cli import main
    from primenb.envs.errors import RegistryError
    from primenb.envs.manage import add

    mod = home / "exits.py"
    mod.write_text("import sys\nsys.exit(3)\n\ndef load_environment():\n    pass\n")
    with pytest.raises(RegistryError, match="SystemExit"):
        add(str(mod), "exits")
    assert main(["env", "add", str(mod), "--id", "exits"]) == 2
    factory = home / "exits_later.py"
    factory.write_text("import sys\n\ndef load_environment():\n    sys.exit('bye')\n")
    with pytest.raises(RegistryError, match="SystemExit"):
        add(str(factory), "exits-later")


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ("reverse-text", {"num_train": 100_000_000}),
        ("reverse-text", {"max_len": 10**9}),
        ("arithmetic", {"num_train": 100_000_000}),
        ("arithmetic", {"num_terms": 10**6}),
    ],
)
def test_item14_environment_arguments_are_bounded(env: str, args: dict[str, int]) -> None:
    from primenb.envs import get_environment
    from primenb.envs.errors import EnvironmentArgumentError

    with pytest.raises(EnvironmentArgumentError, match="must be"):
        get_environment(env, **args)


def test_item14_atomic_writes_follow_the_umask(home: Path) -> None:
    from primenb.fsutil import atomic_write_text

    old = os.umask(0o022)
    try:
        path = atomic_write_text(home / "a.txt", "x")
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o600)
        atomic_write_text(path, "y")  # replacing keeps the file's own mode
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_item14_init_force_does_not_replace_a_symlink(home: Path) -> None:
    from primenb.cli import main

    real = home / "real.toml"
    real.write_text("keep = 1\n")
    (home / "rl.toml").symlink_to(real)
    before = tree(home)
    assert main(["init", "--force"]) == 2
    assert (home / "rl.toml").is_symlink() and real.read_text() == "keep = 1\n"
    assert tree(home) == before


def test_item14_rltoml_refuses_keywords(home: Path, shell) -> None:  # type: ignore[no-untyped-def]
    from primenb.notebook.magics import MagicFailed

    with pytest.raises(MagicFailed, match="not a valid Python variable name"):
        shell.run_cell_magic("rltoml", "for", rl_text())
    assert "for" not in shell.user_ns
