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
