"""`%%rltoml` and `%prime_train`: the notebook face of the config language and the launcher.

Kept cheap to import: the config package, pandas and plotly load on first use.
"""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from primenb.errors import PrimenbError
from primenb.notebook.args import magic_help, magic_parser

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from primenb.protocol.fields import Mode


# a cell's line 1 is `%%rltoml NAME`: the TOML starts on line 2, and diagnostics say so
CELL_FIRST_LINE = 2


class MagicFailed(PrimenbError):
    """Ends a cell (so "Run all" stops) after its problem was displayed; no Python traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31m{self}\x1b[0m"]


@magics_class
class PrimeMagics(Magics):
    @cell_magic
    def rltoml(self, line: str, cell: str) -> None:
        """Validate a prime-rl rl.toml / sft.toml cell; bind it as NAME when valid."""
        self._guard(self._rltoml, line, cell)

    @line_magic
    def prime_train(self, line: str) -> Any:
        """Launch and control fine-tuning runs."""
        words = line.split()
        if words and words[0] == "init":
            return self._guard(self._init, line.split(None, 1)[1] if len(words) > 1 else "")
        return self._guard(self._train, line)

    @property
    def _ipython(self) -> InteractiveShell:
        """The shell these magics were registered with (always set once `%load_ext` ran)."""
        assert self.shell is not None
        return self.shell

    # -- implementations ---------------------------------------------------------------------
    def _guard(self, fn: Any, *args: Any) -> Any:
        """Run a magic; show user errors as messages (the cell still fails, without traceback)."""
        try:
            return fn(*args)
        except MagicFailed:
            raise
        except PrimenbError as exc:
            report = getattr(exc, "report", None)  # e.g. a config the hosted platform would reject
            if report is not None:
                display(report)
            raise MagicFailed(str(exc)) from None

    def _rltoml(self, line: str, cell: str) -> None:
        from primenb.config import Config, check
        from primenb.config.fix import fix_text

        args = magic_parser("train", "rltoml").parse_line(line)
        if not args.name.isidentifier() or keyword.iskeyword(args.name):  # `for`, `class` cannot be bound
            raise MagicFailed(f"`{args.name}` is not a valid Python variable name")
        mode: Mode | None = "sft" if args.sft else "rl" if args.rl else None
        text = cell
        if args.fix:
            fix = fix_text(cell, mode=mode, first_line=CELL_FIRST_LINE, lenient=args.lenient)
            display(fix)
            if fix.changed:
                self._ipython.set_next_input(f"%%rltoml {line.strip().replace('--fix', '').strip()}\n{fix.after}")
                text = fix.after
            outcome = fix.outcome
        else:
            outcome = check(text, mode=mode, first_line=CELL_FIRST_LINE, lenient=args.lenient)
        if outcome.model is None:
            display(outcome.report)
            raise MagicFailed(f"{args.name} not updated: {outcome.report.summary().split(': ', 1)[1]} (listed above)")
        config = Config(outcome.model, mode=outcome.mode, text=text, report=outcome.report)
        if args.save:
            from primenb.protocol.safepath import write_user_file

            write_user_file(args.save, text, overwrite=True)  # a folder, a link, read-only: a message
        self._ipython.user_ns[args.name] = config
        display(config)
        if args.save:
            print(f"saved {args.save}")

    def _train(self, line: str) -> Any:
        from primenb.backends import attach, submit
        from primenb.notebook.monitor import follow_in_cell, show_monitor

        args = magic_parser("train", "train").parse_line(line)
        if args.stop:
            print(_stop_line(attach(args.stop), wait=args.wait))
            return None  # a line, not a second monitor (the run's own cell still shows it)
        if args.ui:  # the form; its Launch goes through the same submit + follow_in_cell as below
            from primenb.notebook.builder import show_builder

            return show_builder(self._config(args.config) if args.config else None)
        if args.attach:
            run = attach(args.attach)
            show_monitor(run)
            return run
        if args.pause or args.resume:
            from primenb.notebook.hosted import pause_or_resume

            return pause_or_resume(args)
        if not args.config:
            raise MagicFailed(
                "usage: %prime_train CONFIG [--name RUN] [--wait] [--backend local]; "
                "or %prime_train init to write a starter config"
            )
        config = self._config(args.config)
        from primenb.backends import default_backend

        if (args.backend or default_backend(config)) == "modelfactory":
            from primenb.notebook.hosted import launch

            return launch(config, args)
        return follow_in_cell(submit(config, name=args.name, backend=args.backend), wait=args.wait)

    def _config(self, ref: str) -> Any:
        from primenb.config import Config, load_config

        value = self._ipython.user_ns.get(ref)
        if isinstance(value, Config):
            return value
        if Path(ref).is_file():
            from primenb.config import ConfigError

            try:
                return load_config(Path(ref))
            except ConfigError as exc:
                display(exc.report)
                raise MagicFailed(
                    f"{ref} is not valid: {exc.report.summary().split(': ', 1)[1]} (listed above)"
                ) from None
        raise MagicFailed(
            f"{ref!r} is neither a %%rltoml config variable nor a .toml file; "
            "write one with %%rltoml NAME or %prime_train init"
        )

    def _init(self, line: str) -> None:
        from primenb.config.templates import starter

        args = magic_parser("train", "init").parse_line(line)
        out = Path(args.out or ("sft.toml" if args.sft else "rl.toml"))
        text = starter(args.model, args.env, sft=args.sft, lora=args.lora)
        from primenb.protocol.safepath import write_user_file

        write_user_file(out, text, overwrite=args.force)
        print(
            f"wrote {out} ({'SFT' if args.sft else 'RL'}, model {args.model or 'primenb/tiny-byte'}); "
            f"train it with: %prime_train {out}"
        )


def _stop_line(run: Any, *, wait: bool) -> str:
    """Ask a run to stop; return at once with one line (``--wait``: after it ended)."""
    from primenb.protocol.rundir import FINAL_STATES

    if run.state in FINAL_STATES:
        return f"{run.name} already {run.state}"
    if wait:
        return f"{run.name}: {run.stop(wait=True)}"
    run.stop(wait=False)
    return (
        f"asked {run.name} to save a checkpoint and stop at its next step; "
        f"%prime_train --stop {run.name} --wait blocks until it has"
    )


def _magic_classes() -> list[type[Magics]]:
    from primenb.notebook.backend_magics import BackendMagics
    from primenb.notebook.env_magics import EnvMagics
    from primenb.notebook.harness_magics import HarnessMagics
    from primenb.notebook.serve_magics import ServeMagics

    return [PrimeMagics, EnvMagics, HarnessMagics, BackendMagics, ServeMagics]


def _display_run(run: Any) -> None:
    from primenb.notebook.monitor import show_monitor

    show_monitor(run)


def register(ipython: Any) -> None:
    for cls in _magic_classes():
        ipython.register_magics(cls)
    # The one display path for a `Run` in a kernel: the live monitor (registered by name, so
    # loading stays cheap). Elsewhere (terminal IPython, nbconvert) `Run.__repr__`/`_repr_html_`.
    if getattr(ipython, "kernel", None) is not None:
        ipython.display_formatter.ipython_display_formatter.for_type_by_name("primenb.run", "Run", _display_run)
    _warm_up()


def _warm_up() -> None:
    """Import the config schema (and the renderer classes it checks against) in the background:
    the first %%rltoml would otherwise wait seconds for them. Never the training stack."""
    import threading

    def work() -> None:
        import contextlib
        import importlib.util

        with contextlib.suppress(Exception):
            import primenb.config.loader  # noqa: F401

            if importlib.util.find_spec("renderers") is not None:
                import renderers.configs  # noqa: F401

    threading.Thread(target=work, name="primenb-warm-up", daemon=True).start()


def unregister(ipython: Any) -> None:
    formatter = ipython.display_formatter.ipython_display_formatter
    formatter.deferred_printers.pop(("primenb.run", "Run"), None)
    for cls in [c for c in formatter.type_printers if f"{c.__module__}.{c.__name__}" == "primenb.run.Run"]:
        formatter.type_printers.pop(cls)
    magics = ipython.magics_manager.magics
    for cls in _magic_classes():
        for kind, names in cls.magics.items():
            for name in names:
                magics[kind].pop(name, None)


# One copy of the usage, generated from `primenb.commands` (also what `%prime_train?` shows).
PrimeMagics.rltoml.__doc__ = f"{PrimeMagics.rltoml.__doc__}\n\n{magic_parser('train', 'rltoml').format_help()}"
PrimeMagics.prime_train.__doc__ = f"{PrimeMagics.prime_train.__doc__}\n\n{magic_help('train', skip=('rltoml',))}"
