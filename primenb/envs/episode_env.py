"""A verifiers environment the local engine trains on through verifiers' own episodes.

The one-turn adapter (`primenb.envs.verifiers_adapter`) turns a taskset into prompts and reward
functions; a taskset it cannot (its own Env playing several turns, its own harness, tools, a user
who opens the conversation, ``setup``/``finalize``) is an `EpisodeEnvironment`: verifiers' ``Env``
(taskset, agent seat with its harness, runtime and turn cap, as the source's ``env`` table says)
and its tasks. Its rows only name the tasks (``prompt`` is a label, ``info.vf_idx`` the task's
position): the engine runs each row as an episode (`primenb.engine.episodes`) and verifiers' own
scoring gives the reward, so it has no reward functions of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from primenb.envs.base import Environment, Row
from primenb.envs.errors import EnvironmentArgumentError
from primenb.envs.verifiers_adapter import MAX_TASKS, dist_version, module_name
from primenb.envs.vf_episodes import chat_program_env, check_env, load_env, take_tasks

LABEL_CHARS = 60


@dataclass
class AgentSeat:
    """The source's ``env.agent`` table as the engine honours it."""

    harness: str = "null"
    runtime: str = "subprocess"
    max_turns: int | None = None
    harness_env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_table(cls, table: Mapping[str, Any] | None) -> AgentSeat:
        t = dict(table or {})
        harness, runtime = t.get("harness") or {}, t.get("runtime") or {}
        max_turns = t.get("max_turns")
        if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1):
            raise EnvironmentArgumentError(f"env.agent.max_turns must be a whole number >= 1, got {max_turns!r}")
        env = harness.get("env") or {} if isinstance(harness, Mapping) else {}
        return cls(
            harness=str(harness.get("id") or "null") if isinstance(harness, Mapping) else "null",
            runtime=str(runtime.get("type") or "subprocess") if isinstance(runtime, Mapping) else "subprocess",
            max_turns=max_turns,
            harness_env={str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {},
        )


@dataclass
class EpisodeEnvironment(Environment):
    """Rows naming verifiers tasks; `task` gives a row's task back."""

    vf_env: Any = field(default=None, repr=False)
    tasks: list[Any] = field(default_factory=list, repr=False)
    seat: AgentSeat = field(default_factory=AgentSeat)

    def format_prompt(self, prompt: Any, *, chat: bool) -> str:
        return str(prompt)  # a label: the episode renders what the model sees

    def task(self, row_info: Mapping[str, Any]) -> Any:
        return self.tasks[int(row_info["vf_idx"])]

    def ideal_conversation(self, row: Row) -> list[dict[str, Any]] | None:
        """The task's conversation with every reply right, when the taskset gives one
        (``info["ideal"]``: chat messages, as primenb's built-in tasksets do): an SFT warm-up
        trains on its assistant turns."""
        info = getattr(self.task(row["info"]).data, "info", None)
        ideal = info.get("ideal") if isinstance(info, dict) else None
        if not isinstance(ideal, list) or not all(isinstance(m, dict) and "role" in m for m in ideal):
            return None
        return [dict(m) for m in ideal]

    def ideal_tools(self, row: Row) -> list[dict[str, Any]] | None:
        """The tools the task's episodes advertise, as the model request carries them
        (``info["tools"]``), so the warm-up renders its ideal conversation with them."""
        info = getattr(self.task(row["info"]).data, "info", None)
        tools = info.get("tools") if isinstance(info, dict) else None
        return [dict(t) for t in tools] if isinstance(tools, list) and tools else None


def task_label(source: str, position: int, task: Any) -> str:
    """A row's prompt: unique per task of a source (sources have distinct names), readable in
    samples and logs."""
    prompt = getattr(task.data, "prompt", None)
    text = prompt if isinstance(prompt, str) else ""
    if isinstance(prompt, list) and prompt:
        text = str(getattr(prompt[-1], "content", "") or "")
    text = " ".join(text.split())[:LABEL_CHARS]
    return f"[{source} #{position}] {text}".rstrip()


def load_episode_environment(
    env_id: str, args: Mapping[str, Any], agent: Mapping[str, Any] | None, *, source: str = ""
) -> EpisodeEnvironment:
    """verifiers' ``Env`` for ``env_id`` with the source's taskset ``args`` and ``agent`` table,
    checked for what cannot run here (`primenb.envs.vf_episodes.check_env`), and its tasks."""
    seat = AgentSeat.from_table(agent)
    env = load_env(
        env_id,
        args,
        harness=seat.harness,
        runtime=seat.runtime,
        max_turns=seat.max_turns,
        harness_env={**chat_program_env(), **seat.harness_env},
    )
    check_env(env)
    bounded = getattr(env.taskset, "bounded", True)
    tasks = take_tasks(env, None if bounded else MAX_TASKS)
    rows: list[Row] = [
        {"prompt": task_label(source or env_id, i, t), "answer": "", "info": {"vf_idx": i, "task_idx": t.data.idx}}
        for i, t in enumerate(tasks)
    ]
    return EpisodeEnvironment(
        id=env_id,
        train=rows,
        args=dict(args),
        description=f"verifiers episodes ({seat.harness} harness, {seat.runtime} runtime)",
        version=dist_version(module_name(env_id).split(".")[0]),
        vf_env=env,
        tasks=tasks,
        seat=seat,
    )


__all__ = ["AgentSeat", "EpisodeEnvironment", "load_episode_environment", "task_label"]
