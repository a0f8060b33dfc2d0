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


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `primenb backend` and its subcommands to the CLI parser."""
    b = sub.add_parser("backend", help="name SSH hosts and SLURM clusters to train on")
    bsub = b.add_subparsers(dest="backend_command", required=True)
    a = bsub.add_parser("add", help="save NAME for a backend URL (ssh://, slurm://) and its options")
    a.add_argument("name")
    a.add_argument("url")
    a.add_argument("options", nargs="*", metavar="KEY=VALUE")
    a.add_argument("--force", action="store_true")
    a.set_defaults(func=_add)
    ls = bsub.add_parser("list", help="the saved backends")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_list)
    s = bsub.add_parser("show", help="a saved backend's URL and options")
    s.add_argument("name")
    s.set_defaults(func=_show)
    r = bsub.add_parser("remove", help="forget a saved backend")
    r.add_argument("name")
    r.set_defaults(func=_remove)
