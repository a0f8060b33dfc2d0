"""Environment ids -> environments.

An id resolves in this order:

1. ids registered in this process with `register_environment` (tests, notebooks);
2. the registry on disk, ``$PRIME_HOME/environments`` (``%prime_env add``);
3. the built-ins (``reverse-text``, ``arithmetic``);
4. ``"package.module:function"``: the function is imported and called with the arguments;
5. installed verifiers v1 tasksets (``verifiers`` 0.4.x; ``owner/name`` ids too).

Unknown ids raise `EnvironmentLookupError` naming the closest known ids. Whatever a factory
returns goes through `primenb.envs.interface.as_environment` (a plain object with a dataset and
reward functions is accepted), and its reward functions are wrapped by `primenb.envs.guard`, so
a reward function that raises on one completion scores it 0.0 instead of stopping a run.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from primenb.envs import store
from primenb.envs.base import Environment
from primenb.envs.errors import (
    EnvironmentArgumentError,
    EnvironmentLoadError,
    EnvironmentLookupError,
)
from primenb.errors import PrimenbError
from primenb.protocol.privacy import error_text

Factory = Callable[..., Any]

_BUILTINS: dict[str, str] = {
    # id -> "module:function", imported on first use
    "reverse-text": "primenb.envs.reverse_text:load_environment",
    "arithmetic": "primenb.envs.arithmetic:load_environment",
}
_REGISTERED: dict[str, Factory] = {}


@dataclass
class Resolved:
    """Where an id resolves: ``source`` says how (in this process, a registered entry's
    source, built-in, import path, verifiers); ``where`` a path or module."""

    id: str
    source: str
    where: str
    entry: store.Entry | None = None


def builtin_ids() -> list[str]:
    """Ids of the environments that ship with primenb."""
    return sorted(_BUILTINS)


def registered_ids() -> list[str]:
    """Ids in the registry on disk (``$PRIME_HOME/environments``)."""
    return store.ids()


def known_ids(*, verifiers: bool = True) -> list[str]:
    """Every id that resolves without an import path: registered here and on disk, built-ins,
    and (with ``verifiers``) installed verifiers taskset packages."""
    ids = {*_REGISTERED, *store.ids(), *_BUILTINS}
    if verifiers:
        from primenb.envs import verifiers_adapter

        ids |= set(verifiers_adapter.installed_tasksets())
    return sorted(ids)


def register_environment(env_id: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Make ``get_environment(env_id, **kw)`` call ``factory(**kw)`` in this process."""
    if not overwrite and (env_id in _REGISTERED or env_id in _BUILTINS):
        raise ValueError(f"environment id {env_id!r} is already registered")
    _REGISTERED[env_id] = factory


def unregister_environment(env_id: str) -> None:
    _REGISTERED.pop(env_id, None)


def _norm(text: str) -> str:
    return text.lower().replace("_", "-").split("@")[0]


def suggest(env_id: str, ids: list[str] | None = None) -> list[str]:
    """Known ids close to ``env_id`` (for "did you mean")."""
    ids = known_ids() if ids is None else ids
    lowered = {_norm(i): i for i in ids}
    norm = _norm(env_id)
    tail = norm.split("/")[-1]
    close = [lowered[m] for m in difflib.get_close_matches(norm, list(lowered), n=3, cutoff=0.6)]
    if tail != norm:
        close += [lowered[m] for m in difflib.get_close_matches(tail, list(lowered), n=3, cutoff=0.6)]
    if tail in lowered:
        close.insert(0, lowered[tail])
    return list(dict.fromkeys(c for c in close if c != env_id))[:3]


def _is_import_path(env_id: str) -> bool:
    module, sep, attr = env_id.partition(":")
    return bool(sep and module and attr and all(p.isidentifier() for p in module.split(".")))


def resolve(env_id: str) -> Resolved | None:
    """Where ``env_id`` resolves (nothing is imported), or None when it is unknown."""
    if env_id in _REGISTERED:
        return Resolved(env_id, "in this process", "")
    entry = store.load(env_id)
    if entry is not None:
        return Resolved(env_id, entry.source, entry.target, entry)
    if env_id in _BUILTINS:
        return Resolved(env_id, "built-in", _BUILTINS[env_id])
    if _is_import_path(env_id):
        return Resolved(env_id, "import path", env_id)
    from primenb.envs import verifiers_adapter

    if verifiers_adapter.could_be_taskset(env_id):
        return Resolved(env_id, "verifiers", verifiers_adapter.module_name(env_id))
    return None


def is_known(env_id: str) -> bool:
    """True when ``env_id`` resolves (see the module docstring); imports nothing."""
    return resolve(env_id) is not None


def unknown_error(env_id: str) -> EnvironmentLookupError:
    close = suggest(env_id)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    return EnvironmentLookupError(
        f"Unknown environment {env_id!r}.{hint} Built-in environments: "
        f"{', '.join(builtin_ids())}. Register a local one with `%prime_env add PATH` "
        f"(`primenb env add PATH`), install a verifiers taskset package, or give "
        f"'package.module:function' returning an environment."
    )


def _import_target(env_id: str, target: str) -> Factory:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
        factory = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise EnvironmentLookupError(f"Could not load environment {env_id!r}: {error_text(exc)}") from exc
    if not callable(factory):
        raise EnvironmentLookupError(f"environment {env_id!r}: {target} is not callable")
    return factory


def _entry_factory(entry: store.Entry) -> Factory:
    from primenb.envs import local

    if entry.kind == "path":
        path = Path(entry.target)
        if not path.exists():
            raise EnvironmentLoadError(
                f"environment {entry.id!r} is registered from {path}, which no longer exists; "
                f"register it again (%prime_env add NEW_PATH --id {entry.id} --force) or "
                f"remove it (%prime_env remove {entry.id})"
            )
        module = local.import_path(path, entry.id)
    else:
        module = local.import_module(entry.target, entry.id)
    return local.entry_point(module, entry.id)


def get_factory(env_id: str) -> Factory:
    """The factory for ``env_id`` (imports it); raises `EnvironmentLookupError` if unknown."""
    found = resolve(env_id)
    if found is None:
        raise unknown_error(env_id)
    if found.source == "in this process":
        return _REGISTERED[env_id]
    if found.entry is not None:
        return _entry_factory(found.entry)
    if found.source == "verifiers":
        from primenb.envs import verifiers_adapter

        def load_taskset(**kwargs: Any) -> Environment:
            return verifiers_adapter.load(env_id, **kwargs)

        return load_taskset
    return _import_target(env_id, found.where)


def environment_args(env_id: str) -> dict[str, Any]:
    """The arguments an environment accepts, with their defaults (``inspect.Parameter.empty``
    for required ones). Lets a config validator check ``[...env.taskset]`` keys."""
    found = resolve(env_id)
    if found is not None and found.source == "verifiers":
        from primenb.envs import verifiers_adapter

        return verifiers_adapter.taskset_args(env_id)
    return _signature_args(get_factory(env_id))


def _signature_args(factory: Factory) -> dict[str, Any]:
    params = inspect.signature(factory).parameters
    return {name: p.default for name, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def get_environment(env_id: str, /, **kwargs: Any) -> Environment:
    """Build the environment ``env_id`` with ``kwargs`` as its arguments.

    Arguments set to None are treated as absent (the default applies). An argument the
    environment does not take raises `EnvironmentArgumentError` listing the accepted ones. An
    environment that raises while loading raises `EnvironmentLoadError` naming it and the cause.
    """
    return build_environment(env_id, get_factory(env_id), kwargs)


def build_environment(env_id: str, factory: Factory, kwargs: dict[str, Any]) -> Environment:
    """Call ``factory(**kwargs)`` (None values dropped) and make an `Environment` of the result,
    with guarded reward functions; errors name ``env_id``."""
    from primenb.envs.guard import guard
    from primenb.envs.interface import as_environment

    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    params: Mapping[str, inspect.Parameter]
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = not params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not takes_any:
        unknown = sorted(set(kwargs) - set(params))
        if unknown:
            accepted = ", ".join(_signature_args(factory)) or "(none)"
            raise EnvironmentArgumentError(
                f"environment {env_id!r} does not take argument(s) {', '.join(unknown)}; it accepts: {accepted}"
            )
    try:
        obj = factory(**kwargs)
    except PrimenbError:
        raise
    except (Exception, SystemExit) as exc:  # a factory calling sys.exit() is a load error, not an exit
        raise EnvironmentLoadError(f"environment {env_id!r} raised while loading: {error_text(exc)}") from exc
    env = as_environment(obj, env_id, kwargs)
    env.reward_funcs = [guard(f, env_id) for f in env.reward_funcs]
    return env


__all__ = [
    "Resolved",
    "build_environment",
    "builtin_ids",
    "environment_args",
    "get_environment",
    "get_factory",
    "is_known",
    "known_ids",
    "register_environment",
    "registered_ids",
    "resolve",
    "suggest",
    "unknown_error",
    "unregister_environment",
]
