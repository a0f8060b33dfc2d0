"""What a user environment's ``load_environment(**kwargs)`` may return, turned into an `Environment`.

Accepted (see ``docs/environments.md``):

* a `primenb.envs.Environment` (used as is);
* any object or dict with these attributes/keys:

  ==================  ========================================================================
  ``dataset``         train rows (also ``train_dataset`` or ``train``): a list of dicts, a
                      ``datasets.Dataset``, or any iterable of dicts. Required, at least one.
  ``eval_dataset``    held-out rows (also ``eval``); optional (evaluation then uses train rows)
  ``reward_funcs``    list of reward functions ``f(prompts, completions, **columns) ->
                      list[float]``, or of ``(function, weight)`` pairs. Required, at least one.
  ``reward_weights``  one weight per function (default 1.0 each)
  ``system_prompt``   optional str
  ``parser``          optional: ``parser(text) -> answer`` (a callable, or an object with
                      ``parse_answer``); gives exact match in evaluation
  ``ideal_completion`` optional ``f(row) -> str``: the full-reward reply (enables SFT)
  ``text_template``   optional: how a text prompt is shown to a model with no chat template
  ``description``, ``version``  optional str
  ==================  ========================================================================

Rows: ``prompt`` (text, or chat messages ``[{"role": ..., "content": ...}]``; ``question`` is
accepted for text prompts), ``answer`` (made a string, default ""), ``info`` (dict, or JSON
text). Any other key is moved into ``info`` so it reaches reward functions the same way in
training and in evaluation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from primenb.envs.base import Environment, Row
from primenb.envs.errors import EnvironmentLoadError
from primenb.protocol.privacy import withheld_or

_TRAIN_KEYS = ("dataset", "train_dataset", "train")
_EVAL_KEYS = ("eval_dataset", "eval")
_ROW_KEYS = {"prompt", "answer", "info"}


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        if isinstance(obj, Mapping):
            if obj.get(name) is not None:
                return obj[name]
        elif getattr(obj, name, None) is not None:
            return getattr(obj, name)
    return None


def _fail(env_id: str, message: str) -> EnvironmentLoadError:
    return EnvironmentLoadError(f"environment {env_id!r}: {message} (see docs/environments.md)")


def as_environment(obj: Any, env_id: str, args: dict[str, Any] | None = None) -> Environment:
    """An `Environment` from what ``load_environment`` returned; raises `EnvironmentLoadError`
    saying what is missing or malformed."""
    if isinstance(obj, Environment):
        env = obj
        if not env.args and args:
            env.args = dict(args)
        env.train = normalize_rows(env.train, env_id, "train")
        env.eval = normalize_rows(env.eval, env_id, "eval")
        check_environment(env, env_id)
        return env
    if obj is None:
        raise _fail(env_id, "load_environment returned None; return an object with a dataset and reward_funcs")
    train = _get(obj, *_TRAIN_KEYS)
    if train is None:
        raise _fail(env_id, f"{type(obj).__name__} has no train data; give it a `dataset` (a list of rows)")
    funcs, weights = _rewards(obj, env_id)
    if len(weights) != len(funcs):
        raise _fail(env_id, f"{len(funcs)} reward functions but {len(weights)} weights")
    parser = _parser(_get(obj, "parser"), env_id)
    ideal = _get(obj, "ideal_completion")
    if ideal is not None and not callable(ideal):
        raise _fail(env_id, "ideal_completion must be a function row -> str")
    env = _DuckEnvironment(
        id=env_id,
        train=normalize_rows(train, env_id, "train"),
        eval=normalize_rows(_get(obj, *_EVAL_KEYS) or [], env_id, "eval"),
        reward_funcs=funcs,
        reward_weights=weights,
        system_prompt=_str_or_none(_get(obj, "system_prompt"), env_id, "system_prompt"),
        text_template=_str_or_none(_get(obj, "text_template"), env_id, "text_template") or "{prompt}",
        args=dict(args or {}),
        description=_str_or_none(_get(obj, "description"), env_id, "description") or "",
        version=str(_get(obj, "version") or ""),
        parser=parser,
    )
    env.ideal = ideal
    check_environment(env, env_id)
    return env


class _DuckEnvironment(Environment):
    """An environment built from a plain object; ``ideal`` is its optional ideal_completion."""

    ideal: Callable[[Row], Any] | None = None

    def ideal_completion(self, row: Row) -> str | None:
        return None if self.ideal is None else str(self.ideal(row))


def check_environment(env: Environment, env_id: str) -> None:
    """At least one train row and one reward function, weights matching, functions callable."""
    if not env.train_rows():
        raise _fail(env_id, "the train dataset is empty; it needs at least one row")
    if not env.reward_funcs:
        raise _fail(env_id, "no reward functions; give it reward_funcs = [f, ...]")
    for func in env.reward_funcs:
        if not callable(func):
            raise _fail(env_id, f"reward function {func!r} is not callable")
    weights = env.reward_weights or []
    if len(weights) != len(env.reward_funcs):
        raise _fail(env_id, f"{len(env.reward_funcs)} reward functions but {len(weights)} weights")
    for w in weights:
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise _fail(env_id, f"reward weight {w!r} is not a number")
    names = env.reward_names()
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise _fail(
            env_id,
            f"two reward functions are named {', '.join(dupes)}; each needs its own "
            "name (it becomes the metric rewards/<name>)",
        )


def _rewards(obj: Any, env_id: str) -> tuple[list[Callable[..., Any]], list[float]]:
    raw = _get(obj, "reward_funcs")
    if raw is None:
        raise _fail(env_id, f"{type(obj).__name__} has no reward_funcs")
    if callable(raw):
        raw = [raw]
    funcs: list[Callable[..., Any]] = []
    weights: list[float] = []
    for item in raw:
        if isinstance(item, tuple) and len(item) == 2 and callable(item[0]):
            funcs.append(item[0])
            weights.append(item[1])
        else:
            funcs.append(item)
            weights.append(1.0)
    given = _get(obj, "reward_weights")
    if given is not None:
        weights = list(given)
    return funcs, weights


def _parser(parser: Any, env_id: str) -> Callable[[str], Any] | None:
    if parser is None:
        return None
    if callable(parser):
        return parser
    method = getattr(parser, "parse_answer", None)
    if callable(method):
        return method
    raise _fail(env_id, "parser must be a function text -> answer, or have a parse_answer method")


def _str_or_none(value: Any, env_id: str, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _fail(env_id, f"{name} must be a string, got {type(value).__name__}")


def normalize_rows(rows: Any, env_id: str, split: str) -> list[Row]:
    """Rows as dicts with ``prompt``, ``answer`` (str) and ``info`` (dict); other keys go into info."""
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise _fail(env_id, f"the {split} dataset must be a list of rows (dicts), got {type(rows).__name__}")
    out: list[Row] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise _fail(env_id, f"{split} row {i} is a {type(row).__name__}, not a dict")
        out.append(_row(row, env_id, f"{split} row {i}"))
    return out


def _row(row: Mapping[str, Any], env_id: str, where: str) -> Row:
    prompt = row.get("prompt")
    if prompt is None and isinstance(row.get("question"), str):
        prompt = row["question"]
    if isinstance(prompt, str):
        pass
    elif (
        isinstance(prompt, list)
        and prompt
        and all(isinstance(m, Mapping) and isinstance(m.get("role"), str) and "content" in m for m in prompt)
    ):
        prompt = [dict(m) for m in prompt]
    else:
        raise _fail(
            env_id,
            f"{where}: `prompt` must be text or a non-empty list of "
            f"{{'role': ..., 'content': ...}} messages, got {withheld_or(repr(prompt)[:80])}",
        )
    info = row.get("info") or {}
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            raise _fail(env_id, f"{where}: `info` is text but not JSON") from None
    if not isinstance(info, Mapping):
        raise _fail(env_id, f"{where}: `info` must be a dict, got {type(info).__name__}")
    info = dict(info)
    for key, value in row.items():
        if key not in _ROW_KEYS and key != "question":
            info.setdefault(key, value)
    answer = row.get("answer")
    out: Row = {"prompt": prompt, "answer": "" if answer is None else str(answer)}
    if info:
        out["info"] = info
    return out


__all__ = ["as_environment", "check_environment", "normalize_rows"]
