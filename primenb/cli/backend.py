"""`primenb backend ...` in a terminal: add, list, show, remove named backends."""

from __future__ import annotations

import argparse
import json


def _add(args: argparse.Namespace) -> int:
    from primenb.backends.spec import add

    spec = add(args.name, args.url, args.options, force=args.force)
    print(f"saved backend {spec.name!r} ({spec.url}); use it with: primenb train FILE --backend {spec.name}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from primenb.backends.spec import list_specs

    specs = [s.to_json() for s in list_specs()]
    if args.json:
        print(json.dumps(specs, indent=2))
    for s in [] if args.json else specs:
        print(f"{s['name']:<20} {s['url']}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from primenb.backends.spec import load, names

    if args.name == "modelfactory":
        from primenb.backends.modelfactory import account

        print(repr(account()))
        return 0
    spec = load(args.name)
    if spec is None:
        print(f"no backend named {args.name!r} (saved: {', '.join(names()) or 'none'})")
        return 1
    print(json.dumps(spec.to_json(), indent=2))
    return 0


def _remove(args: argparse.Namespace) -> int:
    from primenb.backends.spec import remove

    spec = remove(args.name)
    print(f"removed backend {spec.name!r} ({spec.url})")
    return 0
