"""`%prime_harness`: the traces of every run (show, apply, diff, compare, rerun, reindex,
export, import, rm). Cheap to import: the harness, pandas and plotly load on first use."""

from __future__ import annotations

import warnings
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from primenb.errors import PrimenbError
from primenb.notebook.args import MagicParser

USAGE = """%prime_harness show [TRACE] [--last N] [--status S] [--env E] [--model M] [--where EXPR]
%prime_harness apply TRACE [--steps N] [--set key=value ...] [--backend B] [--name RUN] [--wait]
%prime_harness diff A B [C ...]
%prime_harness compare A B [...] [--metric M ...]
%prime_harness rerun TRACE [--backend B] [--name RUN] [--wait]
%prime_harness reindex [FOLDER ...]
%prime_harness export TRACE PATH
%prime_harness import PATH [--dest DIR]
%prime_harness rm TRACE [--files]
TRACE: a trace id, a unique id prefix, a run name, a run directory, or a variable holding a Run/Trace."""


def _parsers() -> dict[str, MagicParser]:
    p: dict[str, MagicParser] = {}
    s = p["show"] = MagicParser("%prime_harness show")
    s.add_argument("trace", nargs="?")
    s.add_argument("--last", type=int, default=None, metavar="N", help="the newest N traces")
    s.add_argument(
        "--status", default=None, metavar="S", help="completed, failed, stopped, running, queued (comma-separated)"
    )
    s.add_argument("--env", default=None, metavar="E", help="environment id (substring)")
    s.add_argument("--model", default=None, metavar="M", help="model id (substring)")
    s.add_argument("--where", default=None, metavar="EXPR", help="SQL expression over the columns")
    a = p["apply"] = MagicParser("%prime_harness apply")
    a.add_argument("trace")
    a.add_argument(
        "--steps", type=int, default=None, metavar="N", help="steps to add (default: as many as the parent trained)"
    )
    a.add_argument("--set", dest="overrides", nargs="+", action="extend", default=[], metavar="key=value")
    a.add_argument("--backend", default=None)
    a.add_argument("--name", default=None)
    a.add_argument("--wait", action="store_true")
    d = p["diff"] = MagicParser("%prime_harness diff")
    d.add_argument("traces", nargs="+")
    c = p["compare"] = MagicParser("%prime_harness compare")
    c.add_argument("traces", nargs="+")
    c.add_argument("--metric", dest="metrics", action="append", default=None, metavar="M")
    r = p["rerun"] = MagicParser("%prime_harness rerun")
    r.add_argument("trace")
    r.add_argument("--backend", default=None)
    r.add_argument("--name", default=None)
    r.add_argument("--wait", action="store_true")
    x = p["reindex"] = MagicParser("%prime_harness reindex")
    x.add_argument("paths", nargs="*")
    e = p["export"] = MagicParser("%prime_harness export")
    e.add_argument("trace")
    e.add_argument("path")
    i = p["import"] = MagicParser("%prime_harness import")
    i.add_argument("path")
    i.add_argument("--dest", default=None)
    m = p["rm"] = MagicParser("%prime_harness rm")
    m.add_argument("trace")
    m.add_argument("--files", action="store_true", help="also delete the run directory")
    return p


@magics_class
class HarnessMagics(Magics):
    @line_magic
    def prime_harness(self, line: str) -> Any:
        """Traces of every run: what was trained, on what, with what, and how it did."""
        from primenb.notebook.magics import MagicFailed

        words = line.split(None, 1)
        command = words[0] if words else "show"
        rest = words[1] if len(words) > 1 else ""
        parsers = _parsers()
        if command not in parsers:
            raise MagicFailed(f"unknown subcommand {command!r}; usage:\n{USAGE}")
        try:
            args = parsers[command].parse_line(rest)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = getattr(self, f"_{command}")(args)
            self._show_warnings(caught)
            return result
        except MagicFailed:
            raise
        except PrimenbError as exc:
            raise MagicFailed(str(exc)) from None

    # -- helpers ----------------------------------------------------------------------------
    def _ref(self, token: str) -> Any:
        """A variable holding a Run or Trace stands for itself; anything else is a reference."""
        from primenb.run import Run
        from primenb.traces.trace import Trace

        ns = self.shell.user_ns if self.shell is not None else {}
        value = ns.get(token) if token.isidentifier() else None
        return value if isinstance(value, (Run, Trace)) else token

    @staticmethod
    def _show_warnings(caught: list[warnings.WarningMessage]) -> None:
        from primenb.harness.refine import HarnessWarning

        for w in caught:
            if issubclass(w.category, HarnessWarning):
                print(f"warning: {w.message}")

    # -- subcommands ------------------------------------------------------------------------
    def _show(self, args: Any) -> Any:
        import primenb.harness as h

        if args.trace:
            return h.get(self._ref(args.trace))
        return h.traces(last=args.last, status=args.status, env=args.env, model=args.model, where=args.where)

    def _apply(self, args: Any) -> Any:
        import primenb.harness as h
        from primenb.notebook.monitor import follow_in_cell

        run = h.apply(
            self._ref(args.trace), steps=args.steps, overrides=args.overrides, backend=args.backend, name=args.name
        )
        print(f"started {run.name} (parent {h.get(self._ref(args.trace)).id}) in {run.dir}")
        return follow_in_cell(run, wait=args.wait)

    def _rerun(self, args: Any) -> Any:
        import primenb.harness as h
        from primenb.notebook.monitor import follow_in_cell

        run = h.rerun(self._ref(args.trace), backend=args.backend, name=args.name)
        print(f"started {run.name}, a rerun of {h.get(self._ref(args.trace)).id}, in {run.dir}")
        return follow_in_cell(run, wait=args.wait)

    def _diff(self, args: Any) -> Any:
        import primenb.harness as h

        return h.diff(*[self._ref(t) for t in args.traces])

    def _compare(self, args: Any) -> None:
        import primenb.harness as h

        display(h.compare(*[self._ref(t) for t in args.traces], metrics=args.metrics))

    def _reindex(self, args: Any) -> None:
        import primenb.harness as h

        r = h.reindex(args.paths)
        print(f"indexed {r['traces']} trace(s) in {r['seconds']:.2f} s ({r['index']})")
        for where, why in r.get("skipped") or []:  # unreadable or oddly shaped trace.json files
            print(f"skipped {where}: {why}")

    def _export(self, args: Any) -> None:
        import primenb.harness as h

        print(f"exported to {h.export(self._ref(args.trace), args.path)}")

    def _import(self, args: Any) -> Any:
        import primenb.harness as h

        return h.import_(args.path, args.dest)

    def _rm(self, args: Any) -> None:
        import primenb.harness as h

        print(h.rm(self._ref(args.trace), files=args.files))


HarnessMagics.prime_harness.__doc__ += "\n\n" + USAGE  # one copy of the usage, also for `%prime_harness?`
