"""The terminal speaks its own syntax: a message from shared code that names a notebook command
(`%prime_serve TRACE`) reaches a terminal as the terminal types it (`primenb serve TRACE`);
Ctrl-C ends a command with one line, not a traceback; `--env` says it is required; the server
snippet names the model the run trained, not its warm-up."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from primenb.commands import CLI, COMMANDS, MAGIC, in_cli_syntax, invocation


def test_every_notebook_invocation_reads_as_its_terminal_one() -> None:
    both = [c for c in COMMANDS if CLI in c.faces and MAGIC in c.faces]
    assert len(both) > 20
    for cmd in both:
        assert in_cli_syntax(invocation(cmd, MAGIC)) == invocation(cmd, CLI)
    # a notebook-only command stays as the notebook types it; text around it is left alone
    assert in_cli_syntax("pause it with %prime_train --pause NAME.") == "pause it with %prime_train --pause NAME."
    assert in_cli_syntax("validate it with %%rltoml NAME") == "validate it with primenb validate FILE"
    assert in_cli_syntax("stop it with %prime_train --stop RUN") == "stop it with primenb stop RUN"


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PRIME_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "primenb.cli", *args], capture_output=True, text=True, timeout=120, env=env
    )


def test_a_cli_error_names_the_cli_command(tmp_path: Path) -> None:
    proc = _cli("serve", "remove", "nope", home=tmp_path / "home")
    assert proc.returncode == 2
    assert "start one with primenb serve TRACE" in proc.stderr and "%prime_" not in proc.stderr


def test_env_is_shown_as_required(tmp_path: Path) -> None:
    proc = _cli("eval", "--help", home=tmp_path / "home")
    assert "required: the environment" in proc.stdout


def test_ctrl_c_ends_a_command_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the terminal's one guard does with Ctrl-C, whichever handler it lands in (an eval
    waiting on its rollouts): exit 130, a line naming the command, no traceback."""
    from primenb import cli
    from primenb.verbs import registry

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(registry, "call", interrupted)
    (cmd,) = [c for c in COMMANDS if (c.family, c.name) == ("eval", "eval")]
    assert cli.dispatch(cmd, object()) == 130
    err = capsys.readouterr().err
    assert err.strip() == "primenb eval: interrupted" and "Traceback" not in err


def test_the_snippet_names_the_trained_adapter_not_the_warm_up() -> None:
    from primenb.serve.client import Server

    models = ["primenb/tiny-byte", "primenb/tiny-byte-warmup-rl1", "primenb/tiny-byte-adapter-rl1"]
    assert 'model="primenb/tiny-byte-adapter-rl1"' in Server("http://127.0.0.1:1/v1", 1, models).snippet()
    only_warm = ["primenb/tiny-byte", "primenb/tiny-byte-warmup-rl1"]
    assert 'model="primenb/tiny-byte-warmup-rl1"' in Server("http://127.0.0.1:1/v1", 1, only_warm).snippet()


def test_a_table_prints_every_cell_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """`primenb serve list`: the models column of a server with several adapters is long; pandas'
    repr cut it at 50 characters with `...`."""
    import pandas as pd

    from primenb import cli

    models = ", ".join(f"primenb/tiny-byte-adapter-run{i}" for i in range(6))
    assert cli.render(pd.DataFrame([{"url": "http://127.0.0.1:8000/v1", "models": models}])) == 0
    out = capsys.readouterr().out
    assert models in out and "..." not in out


def test_a_listing_in_a_cell_shows_every_cell_whole() -> None:
    """`%prime_serve list` in a notebook: the same long models column, cut at pandas' 50 characters
    in the cell's HTML; a listing's cells are what a person copies into the next command."""
    import pandas as pd

    from primenb.notebook.magics import render
    from primenb.verbs import Table

    models = ", ".join(f"primenb/tiny-byte-adapter-run{i}" for i in range(6))
    frame = render(Table([{"url": "http://127.0.0.1:8000/v1", "models": models}]))
    assert isinstance(frame, pd.DataFrame)
    assert models in frame._repr_html_() and models in repr(frame)
    assert models not in pd.DataFrame(frame)._repr_html_()  # what pandas itself shows: cut
