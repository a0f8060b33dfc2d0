"""Errors raised by environments and the training engine.

They derive from `primenb.errors.PrimenbError` when that module exists, so the notebook side can
show them as one-line messages; otherwise from `Exception`.
"""

from __future__ import annotations

try:  # the shared error base lives outside envs/; fall back to Exception without it
    from primenb.errors import PrimenbError as _Base
except Exception:  # pragma: no cover - depends on the rest of the package

    class _Base(Exception):  # type: ignore[no-redef]
        """Stand-in for `primenb.errors.PrimenbError`."""


class EnvironmentLookupError(_Base, KeyError):
    """An environment id is not known. The message names the closest known ids."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class EnvironmentArgumentError(_Base, TypeError):
    """An environment got an argument it does not take, or a bad value."""


__all__ = ["EnvironmentArgumentError", "EnvironmentLookupError"]
