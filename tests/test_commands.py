"""Each command is declared once (`primenb.commands`): the CLI and the magics cannot drift."""

from __future__ import annotations

import argparse

import pytest

from primenb.cli import build_parser
from primenb.commands import BOTH, CLI, COMMANDS, MAGIC, help_text
from primenb.notebook.args import MagicUsageError, magic_parser

SHARED = [c for c in COMMANDS if c.faces == BOTH and any(a.faces == BOTH for a in c.args)]


def _cli_subparser(cmd) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    p = sub.choices[cmd.family if cmd.family != "train" else cmd.name]
    if cmd.family != "train":
        inner = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        p = inner.choices[cmd.name]
    return p


def _options(parser: argparse.ArgumentParser) -> dict[str, tuple]:
    return {
        a.dest: (tuple(a.option_strings), a.default, a.nargs, a.help)
        for a in parser._actions
        if a.dest not in ("help",)
    }


@pytest.mark.parametrize("cmd", SHARED, ids=lambda c: f"{c.family}-{c.name}")
def test_cli_and_magic_share_every_common_argument(cmd):
    cli = _options(_cli_subparser(cmd))
    magic = _options(magic_parser(cmd.family, cmd.name))
    common = {a.kw.get("dest") or a.names[0].lstrip("-").replace("-", "_") for a in cmd.args if a.faces == BOTH}
    for dest in common:
        assert cli[dest] == magic[dest], dest  # same flags, default, nargs and help text
    # face-only arguments stay in their face
    for a in cmd.args:
        dest = a.kw.get("dest") or a.names[0].lstrip("-").replace("-", "_")
        assert (dest in cli) == (CLI in a.faces) and (dest in magic) == (MAGIC in a.faces), dest


def test_magic_help_is_the_declared_help(shell):
    for magic, family in (("prime_harness", "harness"), ("prime_env", "env")):
        doc = shell.find_line_magic(magic).__doc__
        assert help_text(family, MAGIC) in doc
    assert "--no-verifiers" in help_text("env", CLI) and "--json" not in help_text("env", MAGIC)


def test_cli_group_help_is_the_declared_help(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["harness", "--help"])
    assert help_text("harness", CLI) in capsys.readouterr().out


def test_magic_usage_errors_are_messages_not_exits():
    with pytest.raises(MagicUsageError, match="usage: %prime_harness apply"):
        magic_parser("harness", "apply").parse_line("")
    with pytest.raises(MagicUsageError, match="not allowed with"):
        magic_parser("train", "rltoml").parse_line("cfg --sft --rl")


def test_a_misspelt_option_gets_a_did_you_mean():
    with pytest.raises(
        MagicUsageError, match=r"unrecognized arguments: --nmae x; did you mean --name \(not --nmae\)\?"
    ):
        magic_parser("train", "train").parse_line("cfg --nmae x")
    with pytest.raises(MagicUsageError) as info:
        magic_parser("train", "train").parse_line("cfg --zzzzzz")
    assert "did you mean" not in str(info.value)
