"""`env ...`: list, add, show, remove training environments (`primenb env`, `%prime_env`)."""

from __future__ import annotations

from typing import Any

from primenb.commands import EnvAddArgs, EnvListArgs, EnvRemoveArgs, EnvShowArgs
from primenb.verbs import Face, Table, as_json


def list_(args: EnvListArgs, face: Face) -> Any:
    from primenb.envs.catalog import LIST_COLUMNS, list_rows

    columns = [*LIST_COLUMNS]
    table = Table(list_rows(verifiers=not args.no_verifiers), columns, text=[c for c in columns if c != "location"])
    if args.json:
        face.say(as_json(table))
        return None
    return table


def add(args: EnvAddArgs, face: Face) -> Any:
    from primenb.envs.manage import add as register

    card = register(args.target, args.id, force=args.force)
    if args.json:
        face.say(as_json(card))
    face.say(
        f"registered {card.id!r} ({card.source}: {card.where}); use it with "
        f'[orchestrator.train.source.env.taskset] id = "{card.id}"'
    )
    return None if args.json else card


def show(args: EnvShowArgs, face: Face) -> Any:
    from primenb.envs.catalog import parse_assignments
    from primenb.envs.catalog import show as card_of

    card = card_of(args.id, **parse_assignments(args.args))
    if args.json:
        face.say(as_json(card))
        return None
    return card


def remove(args: EnvRemoveArgs, face: Face) -> None:
    from primenb.envs.manage import remove as unregister

    entry = unregister(args.id)
    kept = f" ({entry.target} is left as it was)" if entry.kind == "path" else ""
    face.say(f"removed {entry.id!r} from the registry{kept}")
