"""`primenb` in a terminal: a thin dispatcher over `primenb.commands` (typed arguments) and
`primenb.verbs.registry` (one handler per command), with one error guard and the terminal's rendering."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from primenb.commands import (
    CLI,
    FAMILY_HELP,
    Command,
    add_arguments,
    as_help,
    did_you_mean,
    family,
    help_text,
    in_cli_syntax,
    invocation,
    resolve,
)
from primenb.errors import ConfigError, PrimenbError

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


class TerminalFace:
    """What the verbs ask of a terminal: print, follow with a progress line, ask on stdin."""

    name = CLI

    def ref(self, token: str) -> Any:
        return token

    def config(self, ref: str, mode: Any = None, *, lenient: bool = False) -> Config:
        from primenb.config import load_config
        from primenb.verbs.train import user_path

        return load_config(user_path(ref), mode=mode, lenient=lenient)

    def say(self, text: str) -> None:
        print(text, flush=True)

    def warn(self, text: str) -> None:
        print(f"warning: {in_cli_syntax(text)}", file=sys.stderr)

    def display(self, value: Any) -> None:
        print(value.to_text() if hasattr(value, "to_text") else repr(value))

    def name_problem(self, name: str) -> str | None:
        return None

    def bind(self, name: str, value: Any) -> None:
        pass  # nothing outlives the command

    def offer(self, text: str) -> None:
        print(text)

    def follow(
        self, run: Run, *, new: bool = False, wait: bool = False, detach: bool = False, stop_on_interrupt: bool = False
    ) -> int:
        from primenb.render.progress import follow

        if new:
            self.say(f"started {run.name} in {run.dir}")
        if detach:
            return 0
        return follow(run, stop_on_interrupt=stop_on_interrupt)

    def confirm(
        self, quote: Any, action: Callable[[], Run], *, what: str, wait: bool = False, detach: bool = False
    ) -> int:
        from primenb.backends.modelfactory import LaunchCancelled

        print(quote.text(), flush=True)
        if not sys.stdin.isatty():
            raise LaunchCancelled(f"not {what.lower()}ed: stdin is not a terminal, so nobody can answer: pass --yes")
        try:
            answer = input(f"{what} this hosted run? [y/N] ")
        except EOFError:
            answer = ""
        if answer.strip().lower() not in ("y", "yes"):
            raise LaunchCancelled(f"not {what.lower()}ed (cancelled at the confirmation)")
        return self.follow(action(), new=True, detach=detach)

    def widget(self, kind: str, **options: Any) -> Any:
        raise PrimenbError(f"the {kind} is a notebook widget; in a terminal use the command's arguments")

    def figure(self, make: Callable[[], Any]) -> None:
        pass  # the result's text says it


def render(result: Any) -> int:
    """A handler's result in a terminal: an exit code as is, anything else printed (its repr)."""
    if result is None:
        return 0
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    if hasattr(result, "iloc") and hasattr(result, "to_string"):  # a table: every cell whole (`serve list`'s models)
        print(result.to_string(max_colwidth=None))
        return 0
    print(repr(result))
    return 0


def dispatch(cmd: Command, args: Any) -> int:
    """The terminal's one error guard: a user error is a message (a report printed in full), never
    a traceback; exit 1 for a config that is not valid, 2 for any other refusal."""
    from primenb.verbs.registry import call

    face = TerminalFace()
    try:
        return render(call(cmd, args, face))
    except PrimenbError as exc:
        report = getattr(exc, "report", None)  # a config that is not valid (here, or for a platform)
        if report is not None:
            print(report.to_text())
            if not isinstance(exc, ConfigError):
                print(in_cli_syntax(str(exc)))
            return 1
        print(f"primenb: error: {in_cli_syntax(str(exc))}", file=sys.stderr)  # in the syntax typed here
        return 2
    except KeyboardInterrupt:  # Ctrl-C: what the command was doing is cleaned up by its own finally blocks
        print(f"\n{invocation(cmd, CLI)}: interrupted", file=sys.stderr)
        return 130


class CommandParser(argparse.ArgumentParser):
    """A command's parser: whatever its error (a missing argument too), it also names the option
    a misspelt one looks like (`--nmae`: did you mean --name?)."""

    words: list[str] = []

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self.words = [str(w) for w in (args or [])]
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        known = [o for action in self._actions for o in action.option_strings]
        typed = [
            w for w in self.words if w.startswith("--") and not any(o.startswith(w.split("=", 1)[0]) for o in known)
        ]
        super().error(message + did_you_mean(self, typed))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="primenb", description="prime-rl configs and fine-tuning runs")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CommandParser)
    for cmd in family("train", CLI):
        _add_command(sub, cmd)
    for name in ("backend", "env", "harness", "serve", "eval"):
        add_family(sub, name)
    return parser


def add_family(sub: Any, name: str) -> None:
    """`primenb NAME SUBCOMMAND ...`, declared in `primenb.commands`."""
    group = sub.add_parser(
        name,
        help=as_help(FAMILY_HELP[name]),
        description=help_text(name, CLI),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gsub = group.add_subparsers(dest=f"{name}_command", required=True, parser_class=CommandParser)
    for cmd in family(name, CLI):
        # a family's bare form is how it is typed (`primenb eval MODEL`), so its usage says so
        _add_command(gsub, cmd, prog=f"primenb {name}" if BARE.get(name) == cmd.name else None)


def _add_command(sub: Any, cmd: Command, prog: str | None = None) -> None:
    parser = sub.add_parser(cmd.name, help=as_help(cmd.help), **({"prog": prog} if prog else {}))
    add_arguments(parser, cmd, CLI).set_defaults(cmd=cmd, command_parser=parser)


# families whose bare form is one of their commands: `primenb serve [TRACE ...]`, `primenb eval MODEL ...`
BARE = {"serve": "start", "eval": "eval"}


def normalize(words: list[str]) -> list[str]:
    """``serve [TRACE ...]`` -> ``serve start ...``; ``eval MODEL ...`` -> ``eval eval ...``."""
    if not words or words[0] not in BARE or words[1:2] in (["-h"], ["--help"]):
        return words
    if words[1:2] and words[1] in {c.name for c in family(words[0], CLI)}:
        return words
    return [words[0], BARE[words[0]], *words[1:]]


def main(argv: list[str] | None = None) -> int:
    parsed, unknown = build_parser().parse_known_args(normalize(sys.argv[1:] if argv is None else list(argv)))
    if unknown:  # said by the command's own parser: its usage, and "did you mean" its options
        parsed.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return dispatch(*resolve(parsed.cmd, CLI, parsed))


__all__ = ["TerminalFace", "build_parser", "dispatch", "main", "normalize", "render"]

if __name__ == "__main__":
    sys.exit(main())
