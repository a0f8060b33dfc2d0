"""`%prime_harness`: the traces of every run (show, apply, diff, compare, rerun, reindex,
export, import, rm). Cheap to import: the harness, pandas and plotly load on first use."""

from __future__ import annotations

import warnings
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.display import display

from primenb.commands import MAGIC, family
from primenb.errors import PrimenbError
from primenb.notebook.args import MagicParser, magic_help, magic_parser

USAGE = magic_help("harness")


def _parsers() -> dict[str, MagicParser]:
    return {cmd.name: magic_parser("harness", cmd.name) for cmd in family("harness", MAGIC)}


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

        if args.ui:
            from primenb.notebook.browser import show_browser

            return show_browser(
                status=args.status,
                model=args.model,
                env=args.env,
                last=args.last,
                where=args.where,
                trace=self._ref(args.trace) if args.trace else None,
            )
        if args.trace:
            return h.get(self._ref(args.trace))
        return h.traces(last=args.last, status=args.status, env=args.env, model=args.model, where=args.where)

    def _apply(self, args: Any) -> Any:
        import primenb.harness as h
        from primenb.notebook.monitor import follow_in_cell

        run = h.apply(
            self._ref(args.trace),
            steps=args.steps,
            overrides=args.overrides,
            backend=args.backend,
            name=args.name,
            yes=args.yes,
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


assert HarnessMagics.prime_harness.__doc__ is not None  # it has a docstring
HarnessMagics.prime_harness.__doc__ += "\n\n" + USAGE  # one copy of the usage, also for `%prime_harness?`
