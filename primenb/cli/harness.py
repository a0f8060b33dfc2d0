"""`primenb harness ...` in a terminal: show, apply, rerun, diff, compare, reindex, export,
import, rm (the same operations as `%prime_harness`)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from primenb.protocol.documents import State


def _print_warnings(caught: list[warnings.WarningMessage]) -> None:
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)


def _wait(run: Any, detach: bool) -> int:
    if detach:
        return 0
    try:
        state = run.wait()
    except KeyboardInterrupt:
        print(f"\ninterrupted: asking {run.name} to save a checkpoint and stop...", flush=True)
        state = run.stop(wait=True)
    import primenb.harness as h

    print(repr(h.get(run)))
    return 0 if state in (State.COMPLETED, State.STOPPED) else 1


def _show(args: argparse.Namespace) -> int:
    import primenb.harness as h

    if args.trace:
        print(repr(h.get(args.trace)))
        return 0
    df = h.traces(last=args.last, status=args.status, env=args.env, model=args.model, where=args.where)
    if args.json:
        print(df.to_json(orient="records", date_format="iso", indent=1))
    else:
        print(repr(df))
    return 0


def _apply(args: argparse.Namespace) -> int:
    import primenb.harness as h

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = h.apply(
            args.trace, steps=args.steps, overrides=args.overrides, backend=args.backend, name=args.name, yes=args.yes
        )
    _print_warnings(caught)
    print(f"started {run.name} in {run.dir}", flush=True)
    return _wait(run, args.detach)


def _rerun(args: argparse.Namespace) -> int:
    import primenb.harness as h

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = h.rerun(args.trace, backend=args.backend, name=args.name)
    _print_warnings(caught)
    print(f"started {run.name} in {run.dir}", flush=True)
    return _wait(run, args.detach)


def _diff(args: argparse.Namespace) -> int:
    import primenb.harness as h

    print(repr(h.diff(*args.traces)))
    return 0


def _compare(args: argparse.Namespace) -> int:
    import primenb.harness as h

    comparison = h.compare(*args.traces, metrics=args.metrics)
    print(repr(comparison))
    if args.html:
        comparison.figure.write_html(args.html, include_plotlyjs=True)
        print(f"wrote the chart to {args.html}")
    return 0


def _reindex(args: argparse.Namespace) -> int:
    import primenb.harness as h

    r = h.reindex(args.paths)
    print(f"indexed {r['traces']} trace(s) in {r['seconds']:.2f} s ({r['index']})")
    for where, why in r.get("skipped") or []:  # unreadable or oddly shaped trace.json files
        print(f"skipped {where}: {why}")
    return 0


def _export(args: argparse.Namespace) -> int:
    import primenb.harness as h

    print(f"exported to {h.export(args.trace, args.path)}")
    return 0


def _import(args: argparse.Namespace) -> int:
    import primenb.harness as h

    t = h.import_(args.path, args.dest)
    print(f"imported trace {t.id} into {t.run_dir}")
    return 0


def _rm(args: argparse.Namespace) -> int:
    import primenb.harness as h

    print(h.rm(args.trace, files=args.files))
    return 0
