"""What validating a config adds for the backend it names (``[primenb] backend``).

The config layer validates a cell before any backend is chosen, and sits below `primenb.backends`,
so it cannot ask a backend class. Instead each backend class declares its `BackendRules`
(`Backend.config_rules`) and `primenb.backends.registry` registers them here when it is imported;
whoever validates for a launch has imported `primenb.backends` first (the command dispatcher, the
builder, `primenb.load_config`). A name nothing registered gets no rules of its own. So config/
names no backend: adding one is a class and its registry entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from primenb.config.diagnostics import Report


@dataclass(frozen=True)
class BackendRules:
    """A backend's additions to validation."""

    # launching on it refuses a config with a `local-limit` (primenb's engine, started here): the
    # warning says "refuses it at launch" rather than "only the local engine refuses it"
    refuses_local_limits: bool = False
    # its platform's own rules, located in the text: ``(text, mode, *, source) -> Report``
    platform: Callable[..., Report] | None = None


_REGISTERED: dict[str, BackendRules] = {}


def register(kind: str, rules: BackendRules) -> None:
    """Declare ``rules`` for configs whose ``[primenb] backend`` is ``kind`` (done by the registry)."""
    _REGISTERED[kind] = rules


def rules_for(backend: Any) -> BackendRules:
    """The rules of the backend a config names (its ``[primenb] backend`` value as written)."""
    return _REGISTERED.get(backend, BackendRules()) if isinstance(backend, str) else BackendRules()


__all__ = ["BackendRules", "register", "rules_for"]
