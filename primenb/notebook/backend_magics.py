"""`%prime_backend`: name the places runs go (SSH hosts, SLURM clusters) once, then `--backend NAME`."""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class

from primenb.errors import PrimenbError
from primenb.notebook.args import MagicParser, magic_help, magic_parser

USAGE = magic_help("backend")


def _parser(sub: str) -> MagicParser:
    return magic_parser("backend", sub)


@magics_class
class BackendMagics(Magics):
    @line_magic
    def prime_backend(self, line: str) -> Any:
        """Save, list, show and remove named backends (stored under the primenb home, no secrets).

        e.g. %prime_backend add gpu ssh://me@gpu-box python=/opt/venv/bin/python
        """
        from primenb.backends import spec as store
        from primenb.notebook.magics import MagicFailed

        sub, _, rest = line.strip().partition(" ")
        if sub not in ("list", "add", "show", "remove"):
            raise MagicFailed(f"usage: {USAGE}")
        try:
            args = _parser(sub).parse_line(rest)
            if sub == "list":
                import pandas as pd

                return pd.DataFrame([s.to_json() for s in store.list_specs()])
            if sub == "add":
                saved = store.add(args.name, args.url, args.options, force=args.force)
                print(f"saved backend {saved.name!r} ({saved.url}): %prime_train CONFIG --backend {saved.name}")
                return saved
            if sub == "show" and args.name == "modelfactory":
                from primenb.backends.modelfactory import account

                return account()
            if sub == "show":
                found = store.load(args.name)
                if found is None:
                    raise MagicFailed(f"no backend named {args.name!r} (saved: {', '.join(store.names()) or 'none'})")
                return found
            removed = store.remove(args.name)
            print(f"removed backend {removed.name!r} ({removed.url})")
            return None
        except MagicFailed:
            raise
        except PrimenbError as exc:
            raise MagicFailed(str(exc)) from None


BackendMagics.prime_backend.__doc__ = f"{BackendMagics.prime_backend.__doc__}\n\n{USAGE}"
