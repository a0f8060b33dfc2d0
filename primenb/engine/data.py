"""Training data: environment rows -> TRL datasets, or a hub dataset for SFT."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from primenb.engine.plan import Plan, SourceSpec
from primenb.envs import Environment, get_environment, is_known, verifiers_adapter
from primenb.envs.errors import UnsupportedEnvironmentError
from primenb.errors import PrimenbError

log = logging.getLogger("primenb.engine")


class DatasetLoadError(PrimenbError, RuntimeError):
    """A dataset could not be loaded (offline, wrong name)."""


@dataclass
class Source:
    """A configured source with its built environment."""

    name: str
    env: Environment


def build_sources(specs: list[SourceSpec]) -> list[Source]:
    return [Source(spec.name, _environment(spec)) for spec in specs]


def _environment(spec: SourceSpec) -> Environment:
    """The source's environment: one-turn where it can be, else verifiers' own episodes (a
    taskset with its own Env, harness, tools, or a user who opens the conversation)."""
    try:
        return get_environment(spec.env_id, **spec.env_args)
    except UnsupportedEnvironmentError:
        if not verifiers_adapter.could_be_taskset(spec.env_id):
            raise
    from primenb.envs.episode_env import load_episode_environment

    env = load_episode_environment(spec.env_id, spec.env_args, spec.agent, source=spec.name)
    log.info("%s: verifiers episodes (%s), %d tasks", spec.name, env.description, len(env.tasks))
    return env


def rl_rows(sources: list[Source], *, chat: bool) -> list[dict[str, Any]]:
    """GRPO rows: ``prompt`` (text, or messages for chat models), ``answer``, ``info`` (JSON text,
    so rows with different info keys share one column type) and ``task`` (the source name)."""
    rows = []
    for src in sources:
        for row in src.env.train_rows():
            rows.append(
                {
                    "prompt": src.env.format_prompt(row["prompt"], chat=chat),
                    "answer": str(row.get("answer", "")),
                    "info": json.dumps(row.get("info") or {}),
                    "task": src.name,
                }
            )
    return rows


def sft_env_args(plan: Plan) -> dict[str, Any]:
    """Arguments for an SFT environment: ``data.args`` if given, else those of an eval source with
    the same environment id (so the eval rows stay held out of training)."""
    data = plan.data
    if data.get("args"):
        return dict(data["args"])
    if plan.eval:
        for spec in plan.eval.sources:
            if spec.env_id == data["name"]:
                return dict(spec.env_args)
    return {}


def sft_dataset(plan: Plan, *, chat: bool) -> tuple[Any, Environment | None]:
    """The SFT training dataset and, when it comes from an environment, that environment."""
    from datasets import Dataset

    name = str(plan.data["name"])
    if is_env_name(name):
        env = get_environment(name, **sft_env_args(plan))
        rows = ideal_rows(env, name, chat=chat)
        log.info("SFT data: %d rows from environment %s %s", len(rows), name, env.args)
        return Dataset.from_list(rows), env
    return load_hub_dataset(name, plan.data.get("subsets"), plan.data.get("splits")), None


def is_env_name(name: str) -> bool:
    """An SFT ``data.name`` that names an environment rather than a hub dataset."""
    return is_known(name) and ("/" not in name or ":" in name)


def ideal_rows(env: Environment, name: str, *, chat: bool) -> list[dict[str, Any]]:
    """Prompt/completion rows whose completion is the environment's ideal answer; for an episode
    environment, ``messages`` rows: each task's ideal conversation (loss on the assistant turns)."""
    from primenb.envs.episode_env import EpisodeEnvironment

    if isinstance(env, EpisodeEnvironment):
        conversations = [env.ideal_conversation(row) for row in env.train_rows()]
        if not conversations or any(c is None for c in conversations):
            raise DatasetLoadError(
                f"environment {name!r} gives no ideal conversations (info['ideal'] on its tasks), so an SFT "
                "warm-up cannot train on it; set primenb.sft_warmup_steps = 0"
            )
        rows = []
        for row, conversation in zip(env.train_rows(), conversations, strict=True):
            tools = env.ideal_tools(row)
            # a JSON string (TRL reads it back): one column type whatever each taskset's schemas
            rows.append({"messages": conversation, "tools": json.dumps(tools) if tools else None})
        return rows
    rows = []
    for row in env.train_rows():
        ideal = env.ideal_completion(row)
        if ideal is None:
            raise DatasetLoadError(
                f"environment {name!r} has no ideal completion, so SFT cannot train on it; use a dataset instead"
            )
        prompt = env.format_prompt(row["prompt"], chat=chat)
        completion: Any = [{"role": "assistant", "content": ideal}] if chat else ideal
        rows.append({"prompt": prompt, "completion": completion})
    return rows


def load_hub_dataset(name: str, subsets: Any = None, splits: Any = None) -> Any:
    from datasets import load_dataset

    subset = subsets[0] if isinstance(subsets, list) and subsets else None
    split = splits[0] if isinstance(splits, list) and splits else "train"
    try:
        ds = load_dataset(name, subset, split=split)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise DatasetLoadError(
            f"Could not load dataset {name!r} ({type(exc).__name__}: {first}). If this machine is "
            f'offline, set data.name = "reverse-text" (built in), or download the dataset first '
            f"on a machine with internet and train again."
        ) from exc
    log.info("SFT data: %d rows from dataset %s (split %s)", len(ds), name, split)
    return ds


__all__ = [
    "DatasetLoadError",
    "Source",
    "build_sources",
    "ideal_rows",
    "is_env_name",
    "rl_rows",
    "sft_dataset",
    "sft_env_args",
]
