"""`%%rltoml` and `%prime_train`: the notebook face of the config language and the launcher.

Kept cheap to import: the config package, pandas and plotly load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.display import display

from primenb.errors import PrimenbError
from primenb.notebook.args import MagicParser


class MagicFailed(PrimenbError):
    """Ends a cell (so "Run all" stops) after its problem was displayed; no Python traceback."""

    def _render_traceback_(self) -> list[str]:
        return [f"\x1b[31m{self}\x1b[0m"]


def _rltoml_parser() -> MagicParser:
    p = MagicParser("%%rltoml")
    p.add_argument("name", help="variable that receives the Config")
    p.add_argument("--save", metavar="PATH", help="write the TOML to PATH (atomically) when it is valid")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--sft", action="store_true", help="validate as an SFT config")
    mode.add_argument("--rl", action="store_true", help="validate as an RL config")
    p.add_argument("--fix", action="store_true", help="rewrite legacy keys and offer the migrated cell")
    return p


def _init_parser() -> MagicParser:
    p = MagicParser("%prime_train init")
    p.add_argument("--model", default=None)
    p.add_argument("--env", default=None)
    p.add_argument("--sft", action="store_true")
    p.add_argument("--lora", action="store_true")
    p.add_argument("--out", default=None, help="file to write (default rl.toml, or sft.toml with --sft)")
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    return p


def _train_parser() -> MagicParser:
    p = MagicParser("%prime_train")
    p.add_argument("config", nargs="?", help="a %%rltoml variable or a .toml path")
    p.add_argument("--name", default=None, help="run name (default: <env>--<model>--<id>)")
    p.add_argument("--wait", action="store_true", help="block until the run ends")
    p.add_argument("--backend", default=None, help="where to train (default: [primenb] backend, local)")
    p.add_argument("--stop", metavar="RUN", help="ask a run to save a final checkpoint and stop")
    p.add_argument("--attach", metavar="RUN", help="show a run (e.g. after a kernel restart) and follow it")
    return p


@magics_class
class PrimeMagics(Magics):
    @cell_magic
    def rltoml(self, line: str, cell: str) -> None:
        """Validate a prime-rl rl.toml / sft.toml cell; bind it as NAME when valid.

        %%rltoml NAME [--save PATH] [--sft|--rl] [--fix]
        """
        self._guard(self._rltoml, line, cell)

    @line_magic
    def prime_train(self, line: str) -> Any:
        """Launch and control fine-tuning runs.

        %prime_train CONFIG [--name RUN] [--wait] [--backend local]   (CONFIG: a %%rltoml variable or a .toml path)
        %prime_train --stop RUN | --attach RUN
        %prime_train init [--model M] [--env E] [--sft] [--lora] [--out FILE] [--force]
        """
        words = line.split()
        if words and words[0] == "init":
            return self._guard(self._init, line.split(None, 1)[1] if len(words) > 1 else "")
        return self._guard(self._train, line)

    # -- implementations ---------------------------------------------------------------------
    def _guard(self, fn: Any, *args: Any) -> Any:
        """Run a magic; show user errors as messages (the cell still fails, without traceback)."""
        try:
            return fn(*args)
        except MagicFailed:
            raise
        except PrimenbError as exc:
            raise MagicFailed(str(exc)) from None

    def _rltoml(self, line: str, cell: str) -> None:
        from primenb.config import Config, check
        from primenb.config.fix import fix_text

        args = _rltoml_parser().parse_line(line)
        if not args.name.isidentifier():
            raise MagicFailed(f"`{args.name}` is not a valid Python variable name")
        mode = "sft" if args.sft else "rl" if args.rl else None
        text = cell
        if args.fix:
            fix = fix_text(cell, mode=mode)
            display(fix)
            if fix.changed:
                self.shell.set_next_input(f"%%rltoml {line.strip().replace('--fix', '').strip()}\n{fix.after}")
                text = fix.after
            outcome = fix.outcome
        else:
            outcome = check(text, mode=mode)
        if outcome.model is None:
            display(outcome.report)
            raise MagicFailed(f"{args.name} not updated: {outcome.report.summary().split(': ', 1)[1]} (listed above)")
        config = Config(outcome.model, mode=outcome.mode, text=text, report=outcome.report)
        if args.save:
            config.save(args.save)
        self.shell.user_ns[args.name] = config
        display(config)
        if args.save:
            print(f"saved {args.save}")

    def _train(self, line: str) -> Any:
        from primenb.backends import attach, submit
        from primenb.notebook.monitor import follow_in_cell, show_monitor

        args = _train_parser().parse_line(line)
        if args.stop:
            run = attach(args.stop)
            state = run.stop(wait=True)
            print(f"{run.name}: {state}")
            return run
        if args.attach:
            run = attach(args.attach)
            show_monitor(run)
            return run
        if not args.config:
            raise MagicFailed(
                "usage: %prime_train CONFIG [--name RUN] [--wait] [--backend local]; "
                "or %prime_train init to write a starter config"
            )
        return follow_in_cell(submit(self._config(args.config), name=args.name, backend=args.backend), wait=args.wait)

    def _config(self, ref: str) -> Any:
        from primenb.config import Config, load_config

        value = self.shell.user_ns.get(ref)
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

        args = _init_parser().parse_line(line)
        out = Path(args.out or ("sft.toml" if args.sft else "rl.toml"))
        if out.exists() and not args.force:
            raise MagicFailed(f"{out} already exists; pass --out OTHER.toml, or --force to overwrite it")
        text = starter(args.model, args.env, sft=args.sft, lora=args.lora)
        from primenb.fsutil import atomic_write_text

        atomic_write_text(out, text)
        print(
            f"wrote {out} ({'SFT' if args.sft else 'RL'}, model {args.model or 'primenb/tiny-byte'}); "
            f"train it with: %prime_train {out}"
        )


def _magic_classes() -> list[type[Magics]]:
    from primenb.notebook.backend_magics import BackendMagics
    from primenb.notebook.env_magics import EnvMagics
    from primenb.notebook.harness_magics import HarnessMagics

    return [PrimeMagics, EnvMagics, HarnessMagics, BackendMagics]


def register(ipython: Any) -> None:
    from primenb.notebook.monitor import register_display

    for cls in _magic_classes():
        ipython.register_magics(cls)
    register_display(ipython)


def unregister(ipython: Any) -> None:
    from primenb.notebook.monitor import unregister_display

    unregister_display(ipython)
    magics = ipython.magics_manager.magics
    for cls in _magic_classes():
        for kind, names in cls.magics.items():
            for name in names:
                magics[kind].pop(name, None)
