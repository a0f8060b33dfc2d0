"""What ``%prime_env list`` and ``%prime_env show`` report: every known environment, and one in detail."""

from __future__ import annotations

import inspect
import json
from typing import Any

from primenb.envs import store
from primenb.envs.base import Environment, Row, prompt_text
from primenb.envs.card import EnvironmentCard, RewardInfo, Sample
from primenb.envs.errors import EnvironmentArgumentError
from primenb.envs.guard import checked_score
from primenb.envs.registry import (
    _BUILTINS,
    _REGISTERED,
    _import_target,
    build_environment,
    environment_args,
    get_environment,
    resolve,
    unknown_error,
)
from primenb.protocol.privacy import error_text

LIST_COLUMNS = ["id", "version", "source", "description", "reward_functions", "location"]
NUM_SAMPLES = 3


def list_rows(*, verifiers: bool = True) -> list[dict[str, Any]]:
    """One row per environment: built-ins, then the registry, then installed verifiers tasksets
    (their reward functions are read when shown: listing imports nothing from them)."""
    rows: list[dict[str, Any]] = []
    for env_id in sorted(_BUILTINS):
        env = build_environment(env_id, _import_target(env_id, _BUILTINS[env_id]), {"num_train": 1, "num_eval": 1})
        rows.append(
            _row(
                env_id,
                env.version,
                "built-in",
                env.description,
                env.reward_names(),
                _BUILTINS[env_id].partition(":")[0],
            )
        )
    for env_id in sorted(_REGISTERED):
        rows.append(_row(env_id, "", "in this process", "", [], ""))
    for entry in store.entries():
        rows.append(_row(entry.id, entry.version, entry.source, entry.description, entry.reward_funcs, entry.target))
    if verifiers:
        from primenb.envs import verifiers_adapter

        for env_id, meta in sorted(verifiers_adapter.installed_tasksets().items()):
            rows.append(_row(env_id, meta["version"], "verifiers", meta["description"], None, meta["module"]))
    return rows


def _row(
    env_id: str, version: str, source: str, description: str, rewards: list[str] | None, location: str
) -> dict[str, Any]:
    return {
        "id": env_id,
        "version": version or "",
        "source": source,
        "description": description or "",
        "reward_functions": "(see show)" if rewards is None else ", ".join(rewards),
        "location": location,
    }


def list_frame(*, verifiers: bool = True) -> Any:
    """`list_rows` as a pandas DataFrame (pandas is imported here, on first use)."""
    import pandas as pd

    return pd.DataFrame(list_rows(verifiers=verifiers), columns=LIST_COLUMNS)


def show(env_id: str, **args: Any) -> EnvironmentCard:
    """The card of ``env_id`` built with ``args`` (its defaults otherwise)."""
    found = resolve(env_id)
    if found is None:
        raise unknown_error(env_id)
    env = get_environment(env_id, **args)
    return make_card(env_id, env, source=found.source, where=found.where, arg_defaults=_defaults(env_id, env))


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """``["seed=3", "operations=+-"]`` -> ``{"seed": 3, "operations": "+-"}`` (JSON values, else text)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.isidentifier():
            raise EnvironmentArgumentError(f"expected KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def _defaults(env_id: str, env: Environment) -> dict[str, Any]:
    try:
        defaults = environment_args(env_id)
    except Exception:
        defaults = {}
    out = {k: ("(required)" if v is inspect.Parameter.empty else v) for k, v in defaults.items()}
    out.update({k: v for k, v in env.args.items() if k in out})
    return out


def make_card(
    env_id: str,
    env: Environment,
    *,
    source: str,
    where: str,
    arg_defaults: dict[str, Any],
    num_samples: int = NUM_SAMPLES,
) -> EnvironmentCard:
    train = env.train_rows()
    own_eval = bool(env.eval)
    rewards = [
        RewardInfo(getattr(f, "__name__", "reward"), float(w), inspect.getdoc(f) or "")
        for f, w in zip(env.reward_funcs, env.reward_weights or [], strict=True)
    ]
    samples = [sample(env, row) for row in env.eval_rows()[:num_samples]]
    return EnvironmentCard(
        id=env_id,
        source=source,
        where=where,
        version=env.version,
        description=env.description,
        args=arg_defaults,
        rewards=rewards,
        system_prompt=env.system_prompt,
        num_train=len(train),
        num_eval=len(env.eval) if own_eval else len(train),
        eval_is_train=not own_eval,
        samples=samples,
    )


def perfect_reply(env: Environment, row: Row) -> str:
    """The environment's ideal completion for ``row`` when it has one, else the answer."""
    ideal = env.ideal_completion(row)
    return str(row.get("answer", "")) if ideal is None else ideal


REWARD_CALL_TIMEOUT = 30.0  # seconds one reward call may take while an environment is checked


class RewardTimeout(Exception):
    pass


def call_bounded(func: Any, timeout: float, **kwargs: Any) -> Any:
    """``func(**kwargs)`` in a daemon thread, waited for at most ``timeout`` seconds: a reward
    function that hangs (a network call, an endless loop) makes `RewardTimeout`, not a frozen
    kernel. A thread cannot be killed, so a hung call is left behind (daemon: it never keeps
    the process alive)."""
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func(**kwargs)
        except BaseException as exc:  # handed to the caller as is
            box["error"] = exc

    worker = threading.Thread(target=target, name="primenb-reward-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise RewardTimeout(f"did not return within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def score_each(
    env: Environment, row: Row, reply: str, *, timeout: float | None = None
) -> tuple[float, dict[str, float | str]]:
    """Weighted total and per-function scores of ``reply`` to ``row``; a function that raises,
    or takes longer than ``timeout`` (default `REWARD_CALL_TIMEOUT`), gives its error text (and
    0.0 in the total)."""
    columns = {k: [v] for k, v in row.items() if k != "prompt"}
    columns.setdefault("info", [{}])
    prompt = [env.format_prompt(row["prompt"], chat=False)]
    from primenb.envs.guard import weighted_total

    terms: list[tuple[float, float]] = []
    by_func: dict[str, float | str] = {}
    for func, weight in zip(env.reward_funcs, env.reward_weights or [], strict=True):
        name = getattr(func, "__name__", "reward")
        raw = getattr(func, "__wrapped__", func)
        try:
            limit = REWARD_CALL_TIMEOUT if timeout is None else timeout
            (value,) = call_bounded(raw, limit, prompts=prompt, completions=[reply], **columns)
            score = checked_score(value)  # the guard's rule: a finite number, never text
            value = 0.0 if score is None else score
        except (Exception, SystemExit) as exc:
            errors = getattr(exc, "errors", None)
            if isinstance(errors, dict) and errors:
                exc = next(iter(errors.values()))
            by_func[name] = error_text(exc)[:300]
            continue
        by_func[name] = value
        terms.append((float(weight), value))
    return weighted_total(terms, env.id), by_func  # finite: two 1e308 are clamped, never inf


def sample(env: Environment, row: Row) -> Sample:
    perfect = perfect_reply(env, row)
    p_total, p_by = score_each(env, row, perfect)
    e_total, e_by = score_each(env, row, "")
    return Sample(
        prompt=prompt_text(row["prompt"]),
        answer=str(row.get("answer", "")),
        perfect=perfect,
        perfect_reward=p_total,
        empty_reward=e_total,
        perfect_by_func=p_by,
        empty_by_func=e_by,
    )


__all__ = [
    "LIST_COLUMNS",
    "list_frame",
    "list_rows",
    "make_card",
    "parse_assignments",
    "perfect_reply",
    "score_each",
    "show",
]
