"""`primenb harness ...` in a terminal: show, apply, rerun, diff, compare, reindex, export,
import, rm (the same operations as `%prime_harness`)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any


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
    return 0 if state in ("completed", "stopped") else 1


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
        run = h.apply(args.trace, steps=args.steps, overrides=args.overrides, backend=args.backend, name=args.name)
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


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `primenb harness` and its subcommands to the CLI parser."""
    harness = sub.add_parser("harness", help="traces of every run: show, apply, rerun, diff, compare, ...")
    hs = harness.add_subparsers(dest="harness_command", required=True)

    s = hs.add_parser("show", help="list traces (newest first), or show one")
    s.add_argument("trace", nargs="?", help="trace id, id prefix, run name or run directory")
    s.add_argument("--last", type=int, default=None, metavar="N")
    s.add_argument("--status", default=None)
    s.add_argument("--env", default=None)
    s.add_argument("--model", default=None)
    s.add_argument("--where", default=None, metavar="EXPR", help="SQL expression over the columns")
    s.add_argument("--json", action="store_true", help="the table as JSON records")
    s.set_defaults(func=_show)

    a = hs.add_parser("apply", help="continue a trace from its final checkpoint (a new run, parent = TRACE)")
    a.add_argument("trace")
    a.add_argument("--steps", type=int, default=None, metavar="N")
    a.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="key=value")
    a.add_argument("--backend", default=None)
    a.add_argument("--name", default=None)
    a.add_argument("--detach", action="store_true", help="start it and return")
    a.set_defaults(func=_apply)

    r = hs.add_parser("rerun", help="re-execute a trace from scratch and check the metrics match")
    r.add_argument("trace")
    r.add_argument("--backend", default=None)
    r.add_argument("--name", default=None)
    r.add_argument("--detach", action="store_true")
    r.set_defaults(func=_rerun)

    d = hs.add_parser("diff", help="config/data/environment/deps/hardware differences")
    d.add_argument("traces", nargs="+")
    d.set_defaults(func=_diff)

    c = hs.add_parser("compare", help="summary table of traces (--html FILE: the overlaid chart)")
    c.add_argument("traces", nargs="+")
    c.add_argument("--metric", dest="metrics", action="append", default=None)
    c.add_argument("--html", default=None, metavar="FILE")
    c.set_defaults(func=_compare)

    x = hs.add_parser("reindex", help="rebuild the index from the run directories")
    x.add_argument("paths", nargs="*", help="more folders holding run directories")
    x.set_defaults(func=_reindex)

    e = hs.add_parser("export", help="write a self-contained folder for another machine")
    e.add_argument("trace")
    e.add_argument("path")
    e.set_defaults(func=_export)

    i = hs.add_parser("import", help="bring an exported trace back")
    i.add_argument("path")
    i.add_argument("--dest", default=None)
    i.set_defaults(func=_import)

    m = hs.add_parser("rm", help="remove a trace (--files: and its run directory)")
    m.add_argument("trace")
    m.add_argument("--files", action="store_true")
    m.set_defaults(func=_rm)
