"""`primenb serve ...` and `primenb eval ...` in a terminal (the work is in `primenb.serve.verbs`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from primenb.commands import CLI, FAMILY_HELP, add_arguments, command, help_text


def parser_for(family: str, sub: str) -> argparse.ArgumentParser:
    from primenb.commands import invocation

    cmd = command(family, sub)
    return add_arguments(argparse.ArgumentParser(prog=invocation(cmd, CLI), description=cmd.help), cmd, CLI)


def serve_main(args: argparse.Namespace) -> int:
    from primenb.serve.verbs import HANDLERS, split

    sub, rest = split(list(args.rest))
    parsed = parser_for("serve", sub).parse_args(rest)
    out: Any = HANDLERS[sub](parsed)
    as_json = getattr(parsed, "json", False)
    if sub == "start":
        if as_json:
            print(json.dumps({"url": out.url, "pid": out.pid, "models": out.models}))
        else:
            print(repr(out))
    elif sub == "list":
        print(out.to_json(orient="records") if as_json else (out.to_string(index=False) if len(out) else "no servers"))
    elif sub == "add":
        print(json.dumps(out) if as_json else "now serving " + ", ".join(out))
    elif sub == "remove":
        print(f"removed {out}")
    else:
        print("stopped " + (", ".join(out) or "nothing"))
    sys.stdout.flush()
    return 0


def eval_main(args: argparse.Namespace) -> int:
    from primenb.serve.verbs import eval_run

    parsed = parser_for("eval", "eval").parse_args(list(args.rest))
    result = eval_run(parsed)
    print(result.table.to_json(orient="records") if parsed.json else repr(result))
    return 0


def add_commands(sub: Any) -> None:
    for family, func in (("serve", serve_main), ("eval", eval_main)):
        p = sub.add_parser(
            family,
            help=FAMILY_HELP[family],
            description=help_text(family, CLI),
            formatter_class=argparse.RawDescriptionHelpFormatter,
            add_help=False,
        )
        p.add_argument("rest", nargs=argparse.REMAINDER)
        p.set_defaults(func=func)


def dispatch(words: list[str]) -> int:
    """``primenb serve ...`` / ``primenb eval ...``: errors as one line, like every command."""
    from primenb.errors import PrimenbError

    family, rest = words[0], words[1:]
    if rest[:1] in (["-h"], ["--help"]):
        print(f"primenb {family}: {FAMILY_HELP[family]}\n\n{help_text(family, CLI)}")
        return 0
    try:
        return (serve_main if family == "serve" else eval_main)(argparse.Namespace(rest=rest))
    except PrimenbError as exc:
        print(f"primenb: error: {exc}", file=sys.stderr)
        return 2
