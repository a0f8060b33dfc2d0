"""``%prime_env add`` / ``remove``: change the registry on disk, all or nothing.

`add` imports the folder or module, builds the environment with its default arguments, and
checks it before anything is written: it must yield at least one example and one reward
function, and every reward function must score the first example's perfect answer without
raising. Only then is one entry file written (atomically). A refused add leaves the registry as
it was.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from primenb.envs import local, store
from primenb.envs.card import EnvironmentCard
from primenb.envs.catalog import make_card, perfect_reply, score_each
from primenb.envs.errors import RegistryError
from primenb.envs.registry import _BUILTINS, build_environment, suggest
from primenb.errors import PrimenbError


def default_id(target: str, is_path: bool) -> str:
    """The id a folder / file / module registers under when ``--id`` is not given."""
    if is_path:
        path = Path(target).expanduser().resolve()
        if path.is_file() and path.stem in ("environment", "__init__"):
            path = path.parent
        name = path.stem if path.is_file() else path.name
    else:
        name = target.rsplit(".", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "-", name.replace("_", "-")).strip("-.").lower() or "env"


def add(target: str, env_id: str | None = None, *, force: bool = False) -> EnvironmentCard:
    """Register a local folder / ``.py`` file, or an importable module, as ``env_id``."""
    is_path = local.looks_like_path(target)
    env_id = env_id or default_id(target, is_path)
    store.check_id(env_id)
    if env_id in _BUILTINS:
        raise RegistryError(f"{env_id!r} is a built-in environment; register yours under another id with --id NAME")
    if not force and (existing := store.load(env_id)) is not None:
        raise RegistryError(
            f"{env_id!r} is already registered (from {existing.target}); pass --force to replace it, or --id OTHER"
        )
    try:
        if is_path:
            location = str(Path(target).expanduser().resolve())
            module = local.import_path(Path(location), env_id)
            folder = Path(location) if Path(location).is_dir() else Path(location).parent
        else:
            if not all(p.isidentifier() for p in target.split(".")):
                raise RegistryError(f"{target!r} is neither an existing folder or .py file nor a module name")
            location, folder = target, None
            module = local.import_module(target, env_id)
        factory = local.entry_point(module, env_id)
        required = _required(factory)
        if required:
            raise RegistryError(
                f"{local.ENTRY}() in {getattr(module, '__file__', target)} has required argument(s) "
                f"{', '.join(required)}; give them defaults so the environment can be built from a "
                f"config that does not set them"
            )
        env = build_environment(env_id, factory, {})
        _check_scores(env_id, env)
    except RegistryError:
        raise
    except PrimenbError as exc:
        raise RegistryError(f"not registered: {exc}") from exc
    entry = store.Entry(
        id=env_id,
        kind="path" if is_path else "module",
        target=location,
        version=env.version or local.module_version(module, folder),
        description=env.description or local.first_line(module.__doc__),
        reward_funcs=env.reward_names(),
        args=_json_args(factory),
        takes_any_args=any(p.kind is p.VAR_KEYWORD for p in inspect.signature(factory).parameters.values()),
    )
    store.save(entry)
    card = make_card(env_id, env, source=entry.source, where=entry.target, arg_defaults=dict(entry.args))
    if not card.version:
        card.version = entry.version
    if not card.description:
        card.description = entry.description
    return card


def _required(factory: Any) -> list[str]:
    params = inspect.signature(factory).parameters.values()
    return [p.name for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _json_args(factory: Any) -> dict[str, Any]:
    out = {}
    for name, p in inspect.signature(factory).parameters.items():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        try:
            json.dumps(p.default)
            out[name] = p.default
        except (TypeError, ValueError):
            out[name] = repr(p.default)
    return out


def _check_scores(env_id: str, env: Any) -> None:
    row = env.train_rows()[0]
    _, by_func = score_each(env, row, perfect_reply(env, row))
    failed = {k: v for k, v in by_func.items() if isinstance(v, str)}
    if failed:
        detail = "; ".join(f"{k}: {v}" for k, v in failed.items())
        raise RegistryError(
            f"not registered: environment {env_id!r}: reward function(s) raised on the first "
            f"example's perfect answer ({detail}); fix them and add it again"
        )


def remove(env_id: str) -> store.Entry:
    """Remove ``env_id`` from the registry (its folder or package is left alone)."""
    if env_id in _BUILTINS and store.load(env_id) is None:
        raise RegistryError(f"{env_id!r} is a built-in environment and cannot be removed")
    if store.load(env_id) is None and env_id not in store.ids():
        close = suggest(env_id, store.ids())
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        listed = ", ".join(store.ids()) or "(none)"
        raise RegistryError(f"{env_id!r} is not registered{hint or '.'} Registered: {listed}")
    return store.delete(env_id)


__all__ = ["add", "default_id", "remove"]
