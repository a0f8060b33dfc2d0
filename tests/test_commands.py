"""Each command is declared once (`primenb.commands`): the CLI and the magics cannot drift."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from primenb import commands
from primenb.cli import BARE, build_parser, normalize
from primenb.commands import (
    BOTH,
    CLI,
    COMMANDS,
    MAGIC,
    AttachArgs,
    PauseArgs,
    ResumeArgs,
    StopArgs,
    TrainArgs,
    UiArgs,
    command,
    help_text,
    resolve,
)
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


def _misspelt(option: str) -> str:
    """`--name` -> `--nmae`: the two letters after the first swapped."""
    word = option[2:]
    return "--" + word[0] + word[2] + word[1] + word[3:]


def _cli_words(cmd) -> list[str]:
    top = [] if cmd.family == "train" else [cmd.family]
    return [*top, cmd.name]


@pytest.mark.parametrize("cmd", [c for c in COMMANDS if CLI in c.faces], ids=lambda c: f"{c.family}-{c.name}")
def test_the_cli_says_did_you_mean_for_a_misspelt_option_of_any_command(cmd, capsys):
    """Every long option of every command, misspelt: the command's own usage and the option it
    meant, whether the error is the unknown option or a required argument left out (the CLI said
    only the top-level usage, without a hint)."""
    from primenb.cli import main

    options = [o for a in cmd.args_for(CLI) for o in a.names if o.startswith("--") and len(o) > 5]
    for option in options:
        wrong = _misspelt(option)
        if wrong == option:
            continue
        with pytest.raises(SystemExit) as info:
            main([*_cli_words(cmd), f"{wrong}=1"])
        err = capsys.readouterr().err
        assert info.value.code == 2
        assert "did you mean --" in err and f"(not {wrong})" in err, err
        assert "{validate,init,train" not in err, err  # the command's usage, not the top level's


@pytest.mark.parametrize("family", sorted(BARE))
def test_a_bare_family_command_shows_its_usage_as_typed(family, capsys):
    """`primenb eval` printed `usage: primenb eval eval ...`."""
    from primenb.cli import main

    with pytest.raises(SystemExit):
        main([family, "--no-such-option"])
    err = capsys.readouterr().err
    assert f"usage: primenb {family} [" in err and f"{family} {BARE[family]} [" not in err, err


def _magic(family: str, name: str, line: str):
    return resolve(command(family, name), MAGIC, magic_parser(family, name).parse_line(line))


def _cli(*words: str):
    parsed = build_parser().parse_args(normalize(list(words)))
    return resolve(parsed.cmd, CLI, parsed)


def test_the_old_train_flags_route_to_their_own_commands():
    """`%prime_train --stop RUN` is `%prime_train stop RUN`: the same command and typed arguments."""
    cases = {
        "--stop r1 --wait": ("stop r1 --wait", StopArgs(run="r1", wait=True)),
        "--attach r1 --wait": ("attach r1 --wait", AttachArgs(run="r1", wait=True)),
        "--pause r1 --gpu-type H": ("pause r1 --gpu-type H", PauseArgs(run="r1", gpu_type="H")),
        "--resume r1 --name n --yes": ("resume r1 --name n --yes", ResumeArgs(run="r1", name="n", yes=True)),
        "--ui cfg": ("ui cfg", UiArgs(config="cfg")),  # a flag: CONFIG goes with it by name
    }
    for old, (new, expected) in cases.items():
        cmd, args = _magic("train", "train", old)
        assert (cmd.name, args) == (new.split()[0], expected), old
        assert _magic("train", new.split()[0], new.split(None, 1)[1]) == (cmd, expected), new
    assert _magic("train", "train", "--ui") == (command("train", "ui"), UiArgs())
    cmd, args = _magic("train", "train", "cfg --wait --yes")  # no alias given: the train command
    assert cmd.name == "train" and args == TrainArgs(config="cfg", wait=True, yes=True)


def test_each_face_fills_its_own_arguments_and_keeps_the_others_defaults():
    assert _cli("stop", "r1") == (command("train", "stop"), StopArgs(run="r1", wait=True))  # a terminal waits
    assert _magic("train", "stop", "r1")[1] == StopArgs(run="r1", wait=False)  # a cell asks and returns
    assert _cli("attach", "r1", "--stop")[1] == AttachArgs(run="r1", stop=True)
    assert _cli("harness", "apply", "t", "--set", "a=1", "b=2", "--detach")[1].overrides == ["a=1", "b=2"]
    assert _cli("serve", "t1", "t2")[1].traces == ["t1", "t2"]  # the family's bare form
    with pytest.raises(MagicUsageError, match="unrecognized arguments: --detach"):
        _magic("train", "train", "cfg --detach")


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.family}-{c.name}")
def test_every_argument_is_a_typed_field_and_every_alias_reaches_a_command(cmd):
    fields = {f.name for f in dataclasses.fields(cmd.type)}
    own = [a for a in cmd.args if a.to is None]
    assert {commands.dest(a) for a in own} <= fields
    assert any(cmd.faces) and all(set(a.faces) <= set(cmd.faces) or a.faces == BOTH for a in own)
    for a in cmd.args:
        if a.to is not None:
            target = command(cmd.family, a.to)
            assert set(a.faces) <= set(target.faces), (a.names, target.name)
            assert a.after in {commands.dest(x) for x in cmd.args}, a.names  # its place in help and docs
            assert not target.args[0].names[0].startswith("-")  # its value fills the first positional


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: f"{c.family}-{c.name}")
def test_help_shows_every_declared_help_text_as_written(cmd):
    """argparse %-formats help: a magic's name in it (`%prime_env add`, `%%rltoml`) is shown as
    declared, and `--help` does not fail on it."""
    parsers = [magic_parser(cmd.family, cmd.name)] if MAGIC in cmd.faces else []
    parsers += [_cli_subparser(cmd)] if CLI in cmd.faces else []
    for parser, face in zip(parsers, [f for f in (MAGIC, CLI) if f in cmd.faces], strict=True):
        text = " ".join(parser.format_help().split())
        for a in cmd.args_for(face):
            assert " ".join(a.help.split()) in text, (face, a.names)
