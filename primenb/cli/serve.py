"""`primenb serve ...` and `primenb eval ...` in a terminal (the work is in `primenb.serve.verbs`).

Declared like every family (`primenb serve start|add|remove|list|stop`, `primenb eval eval`); the
bare forms `primenb serve [TRACE ...]` and `primenb eval MODEL ...` are read as `start` / `eval`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from primenb.commands import CLI, FAMILY_HELP, add_arguments, family, help_text


def _show(sub: str, out: Any, as_json: bool) -> None:
    if sub == "start":
        print(json.dumps({"url": out.url, "pid": out.pid, "models": out.models}) if as_json else repr(out))
    elif sub == "list":
        print(out.to_json(orient="records") if as_json else (out.to_string(index=False) if len(out) else "no servers"))
    elif sub == "add":
        print(json.dumps(out) if as_json else "now serving " + ", ".join(out))
    elif sub == "remove":
        print(f"removed {out}")
    else:
        print("stopped " + (", ".join(out) or "nothing"))


def _serve_handler(sub: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from primenb.serve.verbs import HANDLERS

        _show(sub, HANDLERS[sub](args), bool(getattr(args, "json", False)))
        sys.stdout.flush()
        return 0

    return run


def _eval(args: argparse.Namespace) -> int:
    from primenb.serve.verbs import eval_run

    result = eval_run(args)
    print(result.table.to_json(orient="records") if args.json else repr(result))
    return 0


def add_commands(sub: Any) -> None:
    for name in ("serve", "eval"):
        group = sub.add_parser(
            name,
            help=FAMILY_HELP[name],
            description=help_text(name, CLI),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        gsub = group.add_subparsers(dest=f"{name}_command", required=True)
        for cmd in family(name, CLI):
            func = _eval if name == "eval" else _serve_handler(cmd.name)
            add_arguments(gsub.add_parser(cmd.name, help=cmd.help), cmd, CLI).set_defaults(func=func)


def normalize(words: list[str]) -> list[str]:
    """``serve [TRACE ...]`` -> ``serve start ...``; ``eval MODEL ...`` -> ``eval eval ...``."""
    from primenb.serve.verbs import SUBCOMMANDS

    if not words or words[0] not in ("serve", "eval"):
        return words
    rest = words[1:]
    if rest[:1] in (["-h"], ["--help"]):
        return words
    if words[0] == "serve" and (not rest or rest[0] not in (*SUBCOMMANDS, "start")):
        return ["serve", "start", *rest]
    if words[0] == "eval" and rest[:1] != ["eval"]:
        return ["eval", "eval", *rest]
    return words
