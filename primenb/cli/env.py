"""`primenb env ...` in a terminal: list, add, show, remove training environments."""

from __future__ import annotations

import argparse
import json


def _list(args: argparse.Namespace) -> int:
    from primenb.envs.catalog import LIST_COLUMNS, list_rows

    rows = list_rows(verifiers=not args.no_verifiers)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    cols = [c for c in LIST_COLUMNS if c != "location"]
    width = {c: min(60, max([len(c), *(len(str(r[c])) for r in rows)])) for c in cols}
    print("  ".join(c.ljust(width[c]) for c in cols).rstrip())
    for r in rows:
        print("  ".join(_cut(str(r[c]), width[c]).ljust(width[c]) for c in cols).rstrip())
    return 0


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _add(args: argparse.Namespace) -> int:
    from primenb.envs.manage import add

    card = add(args.target, args.id, force=args.force)
    print(json.dumps(card.to_dict(), indent=2) if args.json else repr(card))
    print(f"registered {card.id!r} ({card.source}: {card.where})")
    return 0


def _show(args: argparse.Namespace) -> int:
    from primenb.envs.catalog import parse_assignments, show

    card = show(args.id, **parse_assignments(args.args))
    print(json.dumps(card.to_dict(), indent=2) if args.json else repr(card))
    return 0


def _remove(args: argparse.Namespace) -> int:
    from primenb.envs.manage import remove

    entry = remove(args.id)
    kept = f" ({entry.target} is left as it was)" if entry.kind == "path" else ""
    print(f"removed {entry.id!r} from the registry{kept}")
    return 0


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `primenb env` and its subcommands to the CLI parser."""
    env = sub.add_parser("env", help="list, register, inspect and remove training environments")
    esub = env.add_subparsers(dest="env_command", required=True)

    ls = esub.add_parser("list", help="every known environment (built-in, registered, verifiers)")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--no-verifiers", action="store_true", help="leave out installed verifiers tasksets")
    ls.set_defaults(func=_list)

    a = esub.add_parser("add", help="register a local folder / .py file or an importable module")
    a.add_argument("target", help="a folder or .py file with load_environment(), or a module name")
    a.add_argument("--id", default=None, help="id to register it under (default: the folder/module name)")
    a.add_argument("--force", action="store_true", help="replace an environment registered under the same id")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=_add)

    s = esub.add_parser("show", help="description, arguments, reward functions and sample prompts")
    s.add_argument("id")
    s.add_argument("args", nargs="*", metavar="KEY=VALUE", help="arguments to build it with")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_show)

    r = esub.add_parser("remove", help="unregister an environment (its folder is left alone)")
    r.add_argument("id")
    r.set_defaults(func=_remove)
