"""Environment ids in a config: unknown ids and arguments an environment does not take.

Called by the loader on a schema-valid config. It looks at every taskset of
``[[orchestrator.train.source]]`` / ``[[orchestrator.eval.source]]`` (RL) and ``[[eval.source]]``
(SFT) and imports nothing heavy: the registry is read from its files, verifiers tasksets are
found with ``importlib.util.find_spec``.

* An id that does not resolve but is close to a known one (a typo) is an error located on the
  id, with "did you mean". For an ``owner/name`` hub id it is a warning: a remote backend may
  install it.
* An id that does not resolve and resembles nothing known gives no diagnostic: it may be an
  environment installed where a remote backend trains (upstream's own examples name such ids);
  the local engine reports it when the run starts.
* For a built-in or registered environment, a taskset key it does not take is an error on
  that key, with "did you mean" or the accepted keys.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from primenb.config.positions import Path

CODE = "unknown-env"


@dataclass
class EnvProblem:
    path: Path
    severity: str
    message: str
    hint: str
    code: str = CODE


def _sources(model: Any, mode: str) -> Iterator[tuple[Path, Any]]:
    if mode == "rl":
        orch = model.orchestrator
        for i, src in enumerate(orch.train.source):
            yield ("orchestrator", "train", "source", i), src
        if orch.eval is not None:
            for i, src in enumerate(orch.eval.source):
                yield ("orchestrator", "eval", "source", i), src
    elif model.eval is not None:
        for i, src in enumerate(model.eval.source):
            yield ("eval", "source", i), src


def env_problems(model: Any, mode: str) -> Iterator[EnvProblem]:
    """Problems with the environment ids of a validated RL/SFT config model."""
    from primenb.envs import registry

    for at, src in _sources(model, mode):
        taskset = src.env.taskset
        env_id = getattr(taskset, "id", None) if taskset is not None else None
        if not env_id:
            continue  # the cross-field rules report a missing id
        where = at + ("env", "taskset")
        found = registry.resolve(env_id)
        if found is None:
            close, known = _suggestions(env_id)
            if close:
                hub = "/" in env_id
                yield EnvProblem(
                    where + ("id",),
                    "warning" if hub else "error",
                    f"unknown environment `{env_id}`"
                    + (" (not installed here; a remote backend may install it)" if hub else ""),
                    f"did you mean {' or '.join(f'`{c}`' for c in close)}? Known here: "
                    + ", ".join(known[:12])
                    + (", ..." if len(known) > 12 else ""),
                )
            continue
        yield from _arg_problems(env_id, found, taskset, where)


def _suggestions(env_id: str) -> tuple[list[str], list[str]]:
    """(close ids, known ids) for an id that resolves nowhere. Knowing every id scans the metadata
    of each installed distribution (over a second on a loaded machine), so the answer is kept per
    machine, keyed by the install state, the registry on disk and this process's registrations."""
    from primenb.config import verdict_cache
    from primenb.envs import registry, store

    try:
        registry_state = [store.root().stat().st_mtime_ns, sorted(store.ids())]
    except OSError:
        registry_state = None
    name = verdict_cache.key(
        "env-suggest", env_id, verdict_cache.install_state(), registry_state, sorted(registry._REGISTERED)
    )
    kept = verdict_cache.read("env-suggest", name)
    if isinstance(kept, dict) and isinstance(kept.get("close"), list) and isinstance(kept.get("known"), list):
        return kept["close"], kept["known"]
    known = registry.known_ids()
    close = registry.suggest(env_id, known)
    verdict_cache.write("env-suggest", name, {"close": close, "known": known})
    return close, known


def _accepted(env_id: str, found: Any) -> dict[str, Any] | None:
    """Argument names -> defaults for built-ins and registry entries; None = not checked."""
    if found.entry is not None:
        return None if found.entry.takes_any_args else dict(found.entry.args)
    if found.source == "built-in":
        from primenb.envs import registry

        params = inspect.signature(registry.get_factory(env_id)).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return None
        return {n: p.default for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return None


def _arg_problems(env_id: str, found: Any, taskset: Any, where: Path) -> Iterator[EnvProblem]:
    accepted = _accepted(env_id, found)
    if accepted is None:
        return
    extra = getattr(taskset, "model_extra", None) or {}
    for key in extra:
        if key in accepted:
            continue
        close = difflib.get_close_matches(key, list(accepted), n=1, cutoff=0.6)
        hint = f"did you mean `{close[0]}`?" if close else "it takes: " + (", ".join(accepted) or "no arguments")
        yield EnvProblem(
            where + (key,), "error", f"environment `{env_id}` does not take the argument `{key}`", hint, "env-arg"
        )


__all__ = ["CODE", "EnvProblem", "env_problems"]
