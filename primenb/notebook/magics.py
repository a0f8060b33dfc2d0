"""The magics: `%%rltoml`, `%prime_train`, `%prime_harness`, `%prime_env`, `%prime_backend`.

A thin dispatcher over `primenb.commands` (arguments) and `primenb.verbs` (one handler per
command, shared with the terminal), with one error guard and the notebook's rendering: a magic
returns its result and the cell displays it, once. Kept cheap to import: the config package,
pandas loads on first use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from primenb.commands import MAGIC, command, family, resolve
from primenb.errors import PrimenbError
from primenb.notebook.args import MagicFailed, magic_help, magic_parser

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from primenb.config import Config
    from primenb.run import Run


class NotebookFace:
    """What the verbs ask of a notebook: variables, displays, the monitor, the confirm widget."""

    name = MAGIC

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell

    def ref(self, token: str) -> Any:
        """A variable holding a Run or Trace stands for itself; anything else is a reference."""
        from primenb.run import Run
        from primenb.traces.trace import Trace

        value = self.shell.user_ns.get(token) if token.isidentifier() else None
        return value if isinstance(value, (Run, Trace)) else token

    def config(self, ref: str, mode: Any = None, *, lenient: bool = False) -> Config:
        from primenb.config import Config, ConfigError, load_config
        from primenb.verbs.train import user_path

        value = self.shell.user_ns.get(ref)
        if isinstance(value, Config):
            return value
        path = user_path(ref)
        if path.is_file():
            try:
                return load_config(Path(path), mode=mode, lenient=lenient)
            except ConfigError as exc:
                display(exc.report)
                raise MagicFailed(
                    f"{ref} is not valid: {exc.report.summary().split(': ', 1)[1]} (listed above)"
                ) from None
        raise MagicFailed(
            f"{ref!r} is neither a %%rltoml config variable nor a .toml file; "
            "write one with %%rltoml NAME or %prime_train init"
        )

    def say(self, text: str) -> None:
        print(text)

    def warn(self, text: str) -> None:
        print(f"warning: {text}")

    def display(self, value: Any) -> None:
        display(value)

    def name_problem(self, name: str) -> str | None:
        hidden = getattr(self.shell, "user_ns_hidden", {}) or {}
        history = name.startswith("_") and name.lstrip("_").removeprefix("i").isdigit()  # _5, _i5: history
        if name in hidden or history:
            return f"`{name}` belongs to IPython (it keeps the notebook working); choose another name"
        return None

    def bind(self, name: str, value: Any) -> None:
        self.shell.user_ns[name] = value

    def offer(self, text: str) -> None:
        self.shell.set_next_input(text)

    def follow(
        self, run: Run, *, new: bool = False, wait: bool = False, detach: bool = False, stop_on_interrupt: bool = False
    ) -> Any:
        # a launch answers at once with a plain line; the monitor (ipywidgets, a few dozen
        # widget models: the slow part of a launch) then takes its place
        from primenb.notebook.starting import show_starting

        starting = show_starting(run) if new else None
        from primenb.notebook.monitor import follow_in_cell

        return follow_in_cell(run, wait=wait, starting=starting)

    def confirm(
        self, quote: Any, action: Callable[[], Run], *, what: str, wait: bool = False, detach: bool = False
    ) -> Any:
        from primenb.notebook.confirm import LaunchConfirm

        return LaunchConfirm(quote, action, what=what)  # a cell cannot block on a button

    def widget(self, kind: str, **options: Any) -> Any:
        if kind == "builder":
            from primenb.notebook.builder import show_builder

            return show_builder(options.get("config"), show=False)  # returned, so displayed once
        from primenb.notebook.browser import show_browser

        return show_browser(**options, show=False)

    def figure(self, make: Callable[[], Any]) -> None:
        display(make())  # an SVG figure (primenb.render.svgchart): nothing to import


def render(result: Any) -> Any:
    """A handler's result in a cell: a listing as a DataFrame; exit codes are for terminals."""
    from primenb.verbs import Table

    if isinstance(result, Table):
        return result.frame()
    if isinstance(result, int) and not isinstance(result, bool):
        return None
    return result


@magics_class
class PrimeMagics(Magics):
    @cell_magic
    def rltoml(self, line: str, cell: str) -> None:
        """Validate a prime-rl rl.toml / sft.toml cell; bind it as NAME when valid."""
        self._run("train", "rltoml", line, line=line, cell=cell)

    @line_magic
    def prime_train(self, line: str) -> Any:
        """Launch and control fine-tuning runs."""
        words = line.split(None, 1)
        if words and words[0] in _TRAIN_SUBCOMMANDS:  # `%prime_train init|stop|attach|pause|resume ...`
            return self._run("train", words[0], words[1] if len(words) > 1 else "")
        return self._run("train", "train", line)

    @line_magic
    def prime_harness(self, line: str) -> Any:
        """Traces of every run: what was trained, on what, with what, and how it did."""
        return self._family("harness", line, default="show")

    @line_magic
    def prime_env(self, line: str) -> Any:
        """List, register, inspect and remove training environments."""
        return self._family("env", line)

    @line_magic
    def prime_backend(self, line: str) -> Any:
        """Save, list, show and remove named backends (stored under the primenb home, no secrets).

        e.g. %prime_backend add gpu ssh://me@gpu-box python=/opt/venv/bin/python
        """
        return self._family("backend", line)

    @line_magic
    def prime_serve(self, line: str) -> Any:
        """Serve traces over an OpenAI-compatible API; add, remove, list and stop servers."""
        return self._family("serve", line, bare="start")

    @line_magic
    def prime_eval(self, line: str) -> Any:
        """Evaluate models and traces on an environment's held-out split through a served endpoint."""
        return self._run("eval", "eval", line)

    # -- the one dispatcher and its one error guard ------------------------------------------
    def _family(self, name: str, line: str, *, default: str | None = None, bare: str | None = None) -> Any:
        sub, _, rest = line.strip().partition(" ")
        names = {c.name for c in family(name, MAGIC)}
        if bare is not None and sub not in names:  # `%prime_serve [TRACE ...]`: the bare form
            sub, rest = bare, line
        sub = sub or default or ""
        if sub not in names:
            unknown = f"unknown subcommand {sub!r}; " if sub else ""
            raise MagicFailed(f"{unknown}usage: {magic_help(name)}")
        return self._run(name, sub, rest)

    def _run(self, family_name: str, name: str, words: str, **extra: Any) -> Any:
        """Parse, call the verb, render; a user error shows as a message (the cell still fails)."""
        from primenb.verbs.registry import call

        assert self.shell is not None  # set once `%load_ext` ran
        try:
            parsed = magic_parser(family_name, name).parse_line(words)
            cmd, args = resolve(command(family_name, name), MAGIC, parsed, **extra)
            return render(call(cmd, args, NotebookFace(self.shell)))
        except MagicFailed:
            raise
        except PrimenbError as exc:
            report = getattr(exc, "report", None)  # e.g. a config the hosted platform would reject
            if report is not None:
                display(report)
            raise MagicFailed(str(exc)) from None


_TRAIN_SUBCOMMANDS = {c.name for c in family("train", MAGIC)} - {"train", "rltoml"}


def _display_run(run: Any) -> None:
    from primenb.notebook.monitor import show_monitor

    show_monitor(run)


def register(ipython: Any) -> None:
    ipython.register_magics(PrimeMagics)
    # The one display path for a `Run` in a kernel: the live monitor (registered by name, so
    # loading stays cheap). Elsewhere (terminal IPython, nbconvert) `Run.__repr__`/`_repr_html_`.
    kernel = getattr(ipython, "kernel", None) is not None
    if kernel:
        ipython.display_formatter.ipython_display_formatter.for_type_by_name("primenb.run", "Run", _display_run)
    from primenb.notebook.warmup import warm_up

    warm_up(launch=kernel)


def unregister(ipython: Any) -> None:
    formatter = ipython.display_formatter.ipython_display_formatter
    formatter.deferred_printers.pop(("primenb.run", "Run"), None)
    for cls in [c for c in formatter.type_printers if f"{c.__module__}.{c.__name__}" == "primenb.run.Run"]:
        formatter.type_printers.pop(cls)
    magics = ipython.magics_manager.magics
    for kind, names in PrimeMagics.magics.items():
        for name in names:
            magics[kind].pop(name, None)


# One copy of the usage, generated from `primenb.commands` (also what `%magic?` shows).
PrimeMagics.rltoml.__doc__ = f"{PrimeMagics.rltoml.__doc__}\n\n{magic_parser('train', 'rltoml').format_help()}"
PrimeMagics.prime_train.__doc__ = f"{PrimeMagics.prime_train.__doc__}\n\n{magic_help('train', skip=('rltoml',))}"
for _magic, _family_name in (
    ("prime_harness", "harness"),
    ("prime_env", "env"),
    ("prime_backend", "backend"),
    ("prime_serve", "serve"),
    ("prime_eval", "eval"),
):
    getattr(PrimeMagics, _magic).__doc__ += f"\n\n{magic_help(_family_name)}"

__all__ = ["MagicFailed", "NotebookFace", "PrimeMagics", "register", "unregister"]
