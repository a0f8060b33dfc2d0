"""Errors raised by environments, the environment registry and the training engine.

They derive from `primenb.errors.PrimenbError`, so magics and the CLI show them as one-line
messages and the engine records them as a run's failure reason without a traceback.
"""

from __future__ import annotations

from primenb.errors import PrimenbError


class EnvironmentLookupError(PrimenbError, KeyError):
    """An environment id is not known. The message names the closest known ids."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class EnvironmentArgumentError(PrimenbError, TypeError):
    """An environment got an argument it does not take, or a bad value."""


class EnvironmentLoadError(PrimenbError, RuntimeError):
    """An environment raised while loading, or what it returned is not a usable environment.
    The message names the environment and says why."""


class UnsupportedEnvironmentError(PrimenbError, RuntimeError):
    """The environment needs something the local engine cannot run (tools, several turns, a
    container, a judge model): it runs on a remote backend only."""


class EpisodePartError(UnsupportedEnvironmentError):
    """A part of verifiers' episode loop (a harness, a runtime, a tool server, a judge, the
    inference server, the renderer, the harness's chat program) cannot run here. ``part`` names it;
    the message says why and what would make it run."""

    def __init__(self, part: str, message: str) -> None:
        self.part = part
        super().__init__(f"{part}: {message}")


class RewardFunctionError(PrimenbError, RuntimeError):
    """A reward function broke its contract for a whole batch (e.g. returned the wrong number
    of scores). One failing completion is not this: it is scored 0.0 and logged."""


class RegistryError(PrimenbError, ValueError):
    """Adding or removing a registered environment was refused; the registry is unchanged."""


__all__ = [
    "MAX_ROWS",
    "EnvironmentArgumentError",
    "EnvironmentLoadError",
    "EnvironmentLookupError",
    "EpisodePartError",
    "RegistryError",
    "RewardFunctionError",
    "UnsupportedEnvironmentError",
    "check_range",
]


MAX_ROWS = 1_000_000  # a built-in environment holds its rows in memory: 10**8 took 780 MB and hung


def check_range(env: str, name: str, value: object, lo: int, hi: int) -> int:
    """``value`` when it is an integer in ``lo..hi``; an `EnvironmentArgumentError` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise EnvironmentArgumentError(f"{env}: {name} must be an integer in {lo}..{hi:_}, got {str(value)[:40]}")
    return value
