"""`primenb` in a terminal: validate, init, train, stop, attach."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from primenb.errors import PrimenbError
from primenb.render.progress import follow


def _validate(args: argparse.Namespace) -> int:
    from primenb.config import check

    mode = "sft" if args.sft else "rl" if args.rl else None
    failed = False
    reports = []
    for file in args.files:
        outcome = check(Path(file), mode=mode)
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
    from primenb.fsutil import atomic_write_text

    out = Path(args.out or ("sft.toml" if args.sft else "rl.toml"))
    if out.exists() and not args.force:
        raise PrimenbError(f"{out} already exists; pass --out OTHER.toml, or --force to overwrite it")
    atomic_write_text(out, starter(args.model, args.env, sft=args.sft, lora=args.lora))
    print(f"wrote {out}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from primenb.backends import submit
    from primenb.config import ConfigError, load_config

    try:
        config = load_config(Path(args.file), mode="sft" if args.sft else "rl" if args.rl else None)
    except ConfigError as exc:
        print(exc.report.to_text())
        return 1
    run = submit(config, name=args.name, backend=args.backend)
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

    return follow(attach(args.run))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="primenb", description="prime-rl configs and fine-tuning runs")
    sub = parser.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="validate rl.toml / sft.toml files")
    v.add_argument("files", nargs="+")
    mode = v.add_mutually_exclusive_group()
    mode.add_argument("--sft", action="store_true", help="validate as SFT configs")
    mode.add_argument("--rl", action="store_true", help="validate as RL configs")
    v.add_argument("--json", action="store_true", help="machine-readable diagnostics")
    v.set_defaults(func=_validate)

    i = sub.add_parser("init", help="write a starter config that validates")
    i.add_argument("--model", default=None, help="model id (default: the embedded primenb/tiny-byte)")
    i.add_argument("--env", default=None, help="environment id (default: reverse-text)")
    i.add_argument("--sft", action="store_true", help="an SFT config instead of RL")
    i.add_argument("--lora", action="store_true", help="train LoRA adapters")
    i.add_argument("--out", default=None, help="output file (default rl.toml / sft.toml)")
    i.add_argument("--force", action="store_true", help="overwrite an existing file")
    i.set_defaults(func=_init)

    t = sub.add_parser("train", help="validate a config and train it, printing progress")
    t.add_argument("file")
    t.add_argument("--name", default=None, help="run name (default: <env>--<model>--<id>)")
    t.add_argument("--backend", default=None, help="where to train (default: [primenb] backend, local)")
    t.add_argument("--detach", action="store_true", help="start the run and return at once")
    tm = t.add_mutually_exclusive_group()
    tm.add_argument("--sft", action="store_true")
    tm.add_argument("--rl", action="store_true")
    t.set_defaults(func=_train)

    s = sub.add_parser("stop", help="ask a run to save a final checkpoint and stop")
    s.add_argument("run", help="run name or directory")
    s.add_argument("--timeout", type=float, default=120.0)
    s.set_defaults(func=_stop)

    a = sub.add_parser("attach", help="follow a run's progress")
    a.add_argument("run", help="run name or directory")
    a.set_defaults(func=_attach)

    from primenb.cli import backend as cli_backend
    from primenb.cli import env as cli_env
    from primenb.cli import harness as cli_harness

    cli_backend.add_commands(sub)
    cli_env.add_commands(sub)
    cli_harness.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except PrimenbError as exc:
        print(f"primenb: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
