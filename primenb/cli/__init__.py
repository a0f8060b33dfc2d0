"""`primenb` in a terminal: validate, init, train, stop, attach."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.commands import CLI, FAMILY_HELP, add_arguments, family, help_text
from primenb.errors import PrimenbError
from primenb.render.progress import follow

if TYPE_CHECKING:
    from primenb.protocol.fields import Mode


def _validate(args: argparse.Namespace) -> int:
    from primenb.config import check

    mode: Mode | None = "sft" if args.sft else "rl" if args.rl else None
    failed = False
    reports = []
    for file in args.files:
        outcome = check(Path(file), mode=mode, lenient=args.lenient)
        failed |= not outcome.report.ok
        if args.json:
            reports.append(json.loads(outcome.report.to_json()))
        elif outcome.report.diagnostics:
            print(outcome.report.to_text())
        else:
            print(f"{file}: ok ({outcome.mode.upper()})")
    if args.json:
        print(json.dumps(reports if len(reports) > 1 else reports[0], indent=2))
    return 1 if failed else 0


def _init(args: argparse.Namespace) -> int:
    from primenb.config.templates import starter
    from primenb.protocol.safepath import write_user_file

    out = Path(args.out or ("sft.toml" if args.sft else "rl.toml"))
    write_user_file(out, starter(args.model, args.env, sft=args.sft, lora=args.lora), overwrite=args.force)
    print(f"wrote {out}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from primenb.backends import submit
    from primenb.config import ConfigError, load_config

    if not args.config:
        raise PrimenbError("primenb train needs a config file: primenb train rl.toml")
    try:
        mode: Mode | None = "sft" if args.sft else "rl" if args.rl else None
        config = load_config(Path(args.config), mode=mode, lenient=args.lenient)
    except ConfigError as exc:
        print(exc.report.to_text())
        return 1
    from primenb.backends import default_backend

    options: dict[str, Any] = {}
    if (args.backend or default_backend(config)) == "modelfactory":
        from primenb.cli.hosted import ask_in_terminal

        options = {"gpu_type": args.gpu_type, "volume": args.volume, "team": args.team, "yes": args.yes}
        options["confirm"] = ask_in_terminal
    try:
        run = submit(config, name=args.name, backend=args.backend, options=options)
    except PrimenbError as exc:
        report = getattr(exc, "report", None)  # a config the hosted platform would reject
        if report is None:
            raise
        print(report.to_text())
        print(exc)
        return 1
    print(f"started {run.name} in {run.dir}", flush=True)
    if args.detach:
        return 0
    return follow(run)


def _stop(args: argparse.Namespace) -> int:
    from primenb.backends import attach

    run = attach(args.run)
    print(f"{run.name}: {run.stop(wait=True, timeout=args.timeout)}")
    return 0


def _attach(args: argparse.Namespace) -> int:
    from primenb.backends import attach

    return follow(attach(args.run), stop_on_interrupt=args.stop)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="primenb", description="prime-rl configs and fine-tuning runs")
    sub = parser.add_subparsers(dest="command", required=True)
    handlers = {"validate": _validate, "init": _init, "train": _train, "stop": _stop, "attach": _attach}
    for cmd in family("train", CLI):
        add_arguments(sub.add_parser(cmd.name, help=cmd.help), cmd, CLI).set_defaults(func=handlers[cmd.name])

    from primenb.cli import backend as cli_backend
    from primenb.cli import env as cli_env
    from primenb.cli import harness as cli_harness

    add_family(sub, "backend", {c.name: getattr(cli_backend, f"_{c.name}") for c in family("backend", CLI)})
    add_family(sub, "env", {c.name: getattr(cli_env, f"_{c.name}") for c in family("env", CLI)})
    add_family(sub, "harness", {c.name: getattr(cli_harness, f"_{c.name}") for c in family("harness", CLI)})
    from primenb.cli.serve import add_commands

    add_commands(sub)  # primenb serve ..., primenb eval ...
    return parser


def add_family(sub: Any, name: str, handlers: dict[str, Any]) -> None:
    """`primenb NAME SUBCOMMAND ...`, declared in `primenb.commands`."""
    group = sub.add_parser(
        name,
        help=FAMILY_HELP[name],
        description=help_text(name, CLI),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gsub = group.add_subparsers(dest=f"{name}_command", required=True)
    for cmd in family(name, CLI):
        add_arguments(gsub.add_parser(cmd.name, help=cmd.help), cmd, CLI).set_defaults(func=handlers[cmd.name])


def main(argv: list[str] | None = None) -> int:
    from primenb.cli.serve import normalize

    args = build_parser().parse_args(normalize(sys.argv[1:] if argv is None else list(argv)))
    try:
        return int(args.func(args))
    except PrimenbError as exc:
        print(f"primenb: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
