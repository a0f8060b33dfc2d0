"""`harness ...`: show, apply, rerun, diff, compare, reindex, export, import, rm (one handler each,
for `primenb harness` and `%prime_harness`)."""

from __future__ import annotations

from typing import Any

from primenb.commands import (
    HarnessApplyArgs,
    HarnessCompareArgs,
    HarnessDiffArgs,
    HarnessExportArgs,
    HarnessImportArgs,
    HarnessReindexArgs,
    HarnessRerunArgs,
    HarnessRmArgs,
    HarnessShowArgs,
    work_values,
)
from primenb.errors import PrimenbError
from primenb.render.summary import short_path
from primenb.tracker_kinds import TRACKER_KINDS
from primenb.verbs import Face, as_json, warnings_to


def show(args: HarnessShowArgs, face: Face) -> Any:
    import primenb.harness as h

    if args.ui:
        filters = {"status": args.status, "model": args.model, "env": args.env, "last": args.last, "where": args.where}
        return face.widget("browser", trace=face.ref(args.trace) if args.trace else None, **filters)
    if args.trace:
        return h.get(face.ref(args.trace))
    table = h.traces(last=args.last, status=args.status, env=args.env, model=args.model, where=args.where)
    if args.json:
        face.say(as_json(table))
        return None
    return table


def apply(args: HarnessApplyArgs, face: Face) -> Any:
    import primenb.harness as h

    with warnings_to(face):  # said before the run is followed
        parent = h.get(face.ref(args.trace))
        run = h.apply(parent, **work_values(args, "trace"))  # whole: its fields are `apply`'s parameters
    face.say(f"started {run.name} (parent {parent.id}) in {short_path(run.dir)}")
    return face.follow(run, wait=args.wait, detach=args.detach)


def rerun(args: HarnessRerunArgs, face: Face) -> Any:
    import primenb.harness as h

    with warnings_to(face):
        original = h.get(face.ref(args.trace))
        run = h.rerun(original, **work_values(args, "trace"))
    face.say(f"started {run.name}, a rerun of {original.id}, in {short_path(run.dir)}")
    return face.follow(run, wait=args.wait, detach=args.detach)


def diff(args: HarnessDiffArgs, face: Face) -> Any:
    import primenb.harness as h

    return h.diff(*[face.ref(t) for t in args.traces])


def compare(args: HarnessCompareArgs, face: Face) -> Any:
    import primenb.harness as h

    comparison = h.compare(*[face.ref(t) for t in args.traces], metrics=args.metrics)
    if args.html:
        comparison.write_html(args.html)
        face.say(f"wrote the chart to {args.html}")
    return comparison


def reindex(args: HarnessReindexArgs, face: Face) -> None:
    import primenb.harness as h

    r = h.reindex(args.paths)
    face.say(f"indexed {r['traces']} trace(s) in {r['seconds']:.2f} s ({r['index']})")
    for where, why in r.get("skipped") or []:  # unreadable or oddly shaped trace.json files
        face.say(f"skipped {where}: {why}")


def export(args: HarnessExportArgs, face: Face) -> None:
    import primenb.harness as h

    if args.to:
        if args.path:
            raise PrimenbError("give either a folder or --to TRACKER, not both")
        where = h.export_to(face.ref(args.trace), args.to)
        face.say(f"sent to {args.to}: " + ", ".join(f"{k} {v}" for k, v in where.items()))
        return
    if not args.path:
        raise PrimenbError(f"export needs a folder to write (or --to {'|'.join(TRACKER_KINDS)})")
    face.say(f"exported to {h.export(face.ref(args.trace), args.path)}")


def import_(args: HarnessImportArgs, face: Face) -> Any:
    import primenb.harness as h

    trace = h.import_(args.path, args.dest)
    face.say(f"imported trace {trace.id} into {short_path(trace.run_dir)}")
    return trace


def rm(args: HarnessRmArgs, face: Face) -> None:
    import primenb.harness as h

    face.say(h.rm(face.ref(args.trace), files=args.files))
