"""`%prime_env`: the environments (tasks + reward functions) runs train against."""

from __future__ import annotations

from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class

from primenb.errors import PrimenbError
from primenb.notebook.args import MagicParser, magic_help, magic_parser

USAGE = magic_help("env")


def _parser(sub: str) -> MagicParser:
    return magic_parser("env", sub)


@magics_class
class EnvMagics(Magics):
    @line_magic
    def prime_env(self, line: str) -> Any:
        """List, register, inspect and remove training environments."""
        from primenb.notebook.magics import MagicFailed

        sub, _, rest = line.strip().partition(" ")
        handlers = {"list": self._list, "add": self._add, "show": self._show, "remove": self._remove}
        if sub not in handlers:
            raise MagicFailed(f"usage: {USAGE}")
        try:
            return handlers[sub](_parser(sub).parse_line(rest))
        except MagicFailed:
            raise
        except PrimenbError as exc:
            raise MagicFailed(str(exc)) from None

    def _list(self, args: Any) -> Any:
        from primenb.envs.catalog import list_frame

        return list_frame(verifiers=not args.no_verifiers)

    def _add(self, args: Any) -> Any:
        from primenb.envs.manage import add

        card = add(args.target, args.id, force=args.force)
        print(
            f"registered {card.id!r} ({card.source}: {card.where}); use it with "
            f'[orchestrator.train.source.env.taskset] id = "{card.id}"'
        )
        return card

    def _show(self, args: Any) -> Any:
        from primenb.envs.catalog import parse_assignments, show

        return show(args.id, **parse_assignments(args.args))

    def _remove(self, args: Any) -> None:
        from primenb.envs.manage import remove

        entry = remove(args.id)
        kept = f" ({entry.target} is left as it was)" if entry.kind == "path" else ""
        print(f"removed {entry.id!r} from the registry{kept}")


EnvMagics.prime_env.__doc__ = f"{EnvMagics.prime_env.__doc__}\n\n{USAGE}"
