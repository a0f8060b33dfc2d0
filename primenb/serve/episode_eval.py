"""``%prime_eval`` of a multi-turn or tool-using verifiers environment: its episodes played
against the served model by verifiers' own loop, scored by verifiers.

A taskset that one chat turn cannot express (its own ``Env``, a harness, tools, a user who opens
the conversation) has no held-out rows to prompt; it has tasks. Each of the first ``-n`` tasks is
played ``-r`` times through `primenb.envs.vf_episodes` with verifiers' eval client (OpenAI chat
completions, tools included) against the endpoint, in the agent seat the trace's run played
them in (its config's ``env.agent`` table: harness, runtime, ``max_turns``), else the taskset's
default (harness ``null``, the ``subprocess`` runtime). An episode's reward is verifiers' score of its
agent's run; an episode that failed (the model's turn refused, a tool's error) scores what
verifiers gave it and is counted in ``failed``. The rows have the shape the one-turn evaluator's
have, so the table, the interval, pass@k and the stored eval are the same.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from primenb.commands import EvalArgs
from primenb.serve import client, eval_stats
from primenb.serve.eval_stats import rollout_seed

EVALUATOR = "verifiers episodes"
SAMPLE_FIELDS = ("turns", "tool_calls", "failed")  # what an episode's sample adds to a one-turn one
MAX_CONCURRENT = 8  # episodes in flight: the server batches their turns


def _text(message: dict[str, Any] | None) -> str:
    content = (message or {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: their text
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _record(episode: Any, example: int, rollout: int, seed: int) -> dict[str, Any]:
    messages = episode.messages
    first_user = next((m for m in messages if m.get("role") == "user"), None)
    replies = [m for m in messages if m.get("role") == "assistant"]
    runs = [r for r in episode.runs if r.trainable] or episode.runs
    rewards = {
        name: float(value)
        for run in runs
        for name, value in run.rewards.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool)
    }
    return {
        "example": example,
        "rollout": rollout,
        "seed": seed,
        "prompt": _text(first_user),
        "completion": _text(replies[-1] if replies else None),
        "answer": "",
        "reward": float(episode.reward),
        "rewards": rewards,
        "tokens": 0,  # the eval client's episodes carry no token ids; speeds are not measured
        "turns": len(episode.turns),
        "tool_calls": episode.tool_calls,
        "failed": not episode.ok,
    }


def rollouts(
    server: client.Server,
    model: str,
    e: EvalArgs,
    env_args: dict[str, Any],
    tokens: int,
    *,
    agent: Mapping[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """The episodes of ``e.env``'s first ``e.num_examples`` tasks, ``e.rollouts`` each, as eval
    records, and the wall time, played in the seat ``agent`` (an ``env.agent`` table: harness,
    runtime, max_turns; None: the taskset's default). Each rollout round has its own seed
    (`rollout_seed`), so samples of one task differ at a temperature above 0 and an eval is
    repeatable."""
    from primenb.envs import vf_episodes
    from primenb.envs.episode_env import AgentSeat

    seat = AgentSeat.from_table(agent)
    records: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for rollout in range(e.rollouts):
        round_seed = rollout_seed(e.seed, 0, rollout)
        episodes = vf_episodes.run_episodes(
            e.env,
            args=env_args,
            base_url=server.url,
            model=model,
            num_tasks=e.num_examples,
            client="eval",
            sampling={"temperature": e.temperature, "max_tokens": tokens, "seed": round_seed},
            harness=seat.harness,
            runtime=seat.runtime,
            max_turns=seat.max_turns,
            api_key_var=server.api_key_var,
            max_concurrent=MAX_CONCURRENT,
        )
        records += [_record(ep, example, rollout, round_seed) for example, ep in enumerate(episodes)]
    records.sort(key=lambda r: (r["example"], r["rollout"]))
    return records, time.perf_counter() - t0


def recorded_agent(env_id: str, traces: list[Any]) -> tuple[dict[str, Any] | None, Any]:
    """The ``env.agent`` table (harness, runtime, max_turns) the first trace whose config has one
    for ``env_id`` was trained or evaluated with, and that trace: an eval of the trace plays its
    episodes in the seat its run played them in. (None, None): the taskset's default seat."""
    for trace in traces:
        for table in _env_tables(trace.config):
            if _env_id(table) == env_id and isinstance(table.get("agent"), dict):
                return dict(table["agent"]), trace
    return None, None


def _env_tables(doc: Any) -> Iterator[dict[str, Any]]:
    """Every ``env`` table of a config, wherever its source sits (train or eval, one or a list)."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key == "env" and isinstance(value, dict):
                yield value
            yield from _env_tables(value)
    elif isinstance(doc, list):
        for item in doc:
            yield from _env_tables(item)


def _env_id(table: dict[str, Any]) -> str:
    taskset = table.get("taskset")  # as the engine's plan reads a source: env.taskset.id, else env.id
    return str((taskset.get("id") if isinstance(taskset, dict) else None) or table.get("id") or "")


def summary_columns(records: list[dict[str, Any]]) -> dict[str, Any]:
    """An episode eval's own summary columns (none for one-turn records): turns and tool calls per
    episode, and the episodes that failed."""
    if not records or "turns" not in records[0]:
        return {}
    return {
        "turns_mean": round(eval_stats.mean(r["turns"] for r in records), 2),
        "tool_calls_mean": round(eval_stats.mean(r["tool_calls"] for r in records), 2),
        "failed": sum(1 for r in records if r["failed"]),
    }


__all__ = ["EVALUATOR", "SAMPLE_FIELDS", "recorded_agent", "rollouts", "summary_columns"]
