"""Environment ids -> environment factories.

Ids are looked up in this order:

1. ids registered in this process (the built-ins, and ``register_environment``);
2. ``"package.module:function"``: the function is imported and called with the arguments (this
   is how a user environment reaches the training process, which is a separate process).

Unknown ids raise `EnvironmentLookupError` naming the closest known ids.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable
from typing import Any

from primenb.envs.base import Environment
from primenb.envs.errors import EnvironmentArgumentError, EnvironmentLookupError

Factory = Callable[..., Environment]

_BUILTINS: dict[str, str] = {
    # id -> "module:function", imported on first use
    "reverse-text": "primenb.envs.reverse_text:load_environment",
}
_REGISTERED: dict[str, Factory] = {}


def builtin_ids() -> list[str]:
    """Ids of the environments that ship with primenb."""
    return sorted(_BUILTINS)


def known_ids() -> list[str]:
    """Built-in ids plus those registered in this process."""
    return sorted({*_BUILTINS, *_REGISTERED})


def register_environment(env_id: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Make ``get_environment(env_id, **kw)`` call ``factory(**kw)`` in this process."""
    if not overwrite and (env_id in _REGISTERED or env_id in _BUILTINS):
        raise ValueError(f"environment id {env_id!r} is already registered")
    _REGISTERED[env_id] = factory


def suggest(env_id: str) -> list[str]:
    """Known ids close to ``env_id`` (for "did you mean")."""
    ids = known_ids()
    close = difflib.get_close_matches(env_id, ids, n=3, cutoff=0.5)
    lowered = {i.lower().replace("_", "-"): i for i in ids}
    norm = env_id.lower().replace("_", "-").split("/")[-1]
    if norm in lowered and lowered[norm] not in close:
        close.insert(0, lowered[norm])
    return close


def is_known(env_id: str) -> bool:
    """True for registered/built-in ids and for ``module:function`` ids (not imported here)."""
    return env_id in _REGISTERED or env_id in _BUILTINS or _is_import_path(env_id)


def _is_import_path(env_id: str) -> bool:
    module, sep, attr = env_id.partition(":")
    return bool(sep and module and attr and all(p.isidentifier() for p in module.split(".")))


def _unknown(env_id: str) -> EnvironmentLookupError:
    close = suggest(env_id)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return EnvironmentLookupError(
        f"Unknown environment {env_id!r}.{hint} Built-in environments: "
        f"{', '.join(builtin_ids())}. A custom environment can be given as "
        f"'package.module:function' returning a primenb.envs.Environment."
    )


def get_factory(env_id: str) -> Factory:
    """The factory for ``env_id`` (imports it); raises `EnvironmentLookupError` if unknown."""
    if env_id in _REGISTERED:
        return _REGISTERED[env_id]
    target = _BUILTINS.get(env_id) or (env_id if _is_import_path(env_id) else None)
    if target is None:
        raise _unknown(env_id)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise EnvironmentLookupError(
            f"Could not load environment {env_id!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if not callable(factory):
        raise EnvironmentLookupError(f"environment {env_id!r}: {target} is not callable")
    return factory  # type: ignore[no-any-return]


def environment_args(env_id: str) -> dict[str, Any]:
    """The arguments an environment accepts, with their defaults (``inspect.Parameter.empty``
    for required ones). Lets a config validator check ``[...env.taskset]`` keys."""
    params = inspect.signature(get_factory(env_id)).parameters
    return {
        name: p.default
        for name, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def get_environment(env_id: str, /, **kwargs: Any) -> Environment:
    """Build the environment ``env_id`` with ``kwargs`` as its arguments.

    Arguments set to None are treated as absent (the default applies). An argument the
    environment does not take raises `EnvironmentArgumentError` listing the accepted ones.
    """
    factory = get_factory(env_id)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    params = inspect.signature(factory).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_any:
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            accepted = ", ".join(environment_args(env_id)) or "(none)"
            raise EnvironmentArgumentError(
                f"environment {env_id!r} does not take argument(s) {', '.join(unknown)}; "
                f"it accepts: {accepted}"
            )
    env = factory(**kwargs)
    if not isinstance(env, Environment):
        raise EnvironmentLookupError(
            f"environment {env_id!r}: its factory returned {type(env).__name__}, "
            f"not a primenb.envs.Environment"
        )
    return env


__all__ = [
    "builtin_ids",
    "environment_args",
    "get_environment",
    "get_factory",
    "is_known",
    "known_ids",
    "register_environment",
    "suggest",
]
