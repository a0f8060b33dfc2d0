"""`backend ...`: add, list, show, remove named backends (`primenb backend`, `%prime_backend`)."""

from __future__ import annotations

from typing import Any

from primenb.commands import (
    BackendAddArgs,
    BackendListArgs,
    BackendRemoveArgs,
    BackendShowArgs,
    command,
    invocation,
)
from primenb.verbs import Face, Table, as_json


def add(args: BackendAddArgs, face: Face) -> None:
    from primenb.backends.spec import add as save

    spec = save(args.name, args.url, args.options, force=args.force)
    train = invocation(command("train", "train"), face.name)
    face.say(f"saved backend {spec.name!r} ({spec.url}); use it with: {train} CONFIG --backend {spec.name}")


def list_(args: BackendListArgs, face: Face) -> Any:
    from primenb.backends.spec import list_specs

    table = Table([s.to_json() for s in list_specs()], text=["name", "url"])
    if args.json:
        face.say(as_json(table))
        return None
    return table


def show(args: BackendShowArgs, face: Face) -> Any:
    from primenb.backends import capabilities, get_backend
    from primenb.backends.spec import load, names
    from primenb.errors import PrimenbError

    if capabilities(args.name).describes_account:  # a platform with no saved spec: who pays
        return get_backend(args.name).account()
    spec = load(args.name)
    if spec is None:
        raise PrimenbError(f"no backend named {args.name!r} (saved: {', '.join(names()) or 'none'})")
    return spec


def remove(args: BackendRemoveArgs, face: Face) -> None:
    from primenb.backends.spec import remove as forget

    spec = forget(args.name)
    face.say(f"removed backend {spec.name!r} ({spec.url})")
