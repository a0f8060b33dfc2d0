"""`primenb` in a terminal: validate and init (train and harness come with the engine)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from primenb.errors import PrimenbError


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
