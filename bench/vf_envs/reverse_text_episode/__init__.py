"""reverse-text-episode: primenb's built-in ``reverse-text`` as a verifiers taskset that plays its
one turn through its own ``Env`` (bench only: ``bench/bench_engine.py``, ``BENCH_MODES=episodes``).

The task, strings and reward are reverse-text's (same ``seed``, ``min_len``/``max_len``: the same
training strings in the same order; reward ``lcs`` on the text inside ``<reversed_text>`` tags).
Because the taskset ships its own ``Env``, primenb's one-turn adapter refuses it and the engine
trains it on verifiers' episodes (policy server, harness process, HTTP per turn): the bench times
that path against the engine's own generation on the very same task. What the model sees differs
by the chat wrapping: the episode renders the user message ``hello`` through the model's chat
template, the one-turn engine shows a template-less model ``hello=``.
"""

from __future__ import annotations

from collections.abc import Iterator

import verifiers.v1 as vf

from primenb.envs.reverse_text import lcs_ratio, load_environment, parse_reversed


class ReverseTextEpisodeConfig(vf.TasksetConfig):
    num_tasks: int = 20000
    min_len: int = 5
    max_len: int = 10
    seed: int = 0


class ReverseTextEpisodeTaskData(vf.TaskData):
    info: dict
    """``text`` (the string to reverse) and ``answer`` (it reversed)."""


class ReverseTextEpisodeTask(vf.Task[ReverseTextEpisodeTaskData]):
    @vf.reward(weight=1.0)
    async def lcs(self, trace: vf.Trace) -> float:
        replies = [m.content or "" for m in trace.assistant_messages]
        return lcs_ratio(parse_reversed(replies[0] if replies else ""), self.data.info["answer"])


class ReverseTextEpisodeEnv(vf.SingleAgentEnv):
    """Plays the one user turn (the string) through an interaction, as a multi-turn Env would."""

    async def run(self, task, agents):
        async with agents.agent.interaction(task) as interaction:
            await interaction.turn(task.data.info["text"])


class ReverseTextEpisodeTaskset(vf.Taskset[ReverseTextEpisodeTask, ReverseTextEpisodeConfig]):
    def load(self) -> Iterator[ReverseTextEpisodeTask]:
        c = self.config
        # reverse-text's own draw (its held-out strings come first from the seed), so its training strings
        env = load_environment(min_len=c.min_len, max_len=c.max_len, num_train=c.num_tasks, seed=c.seed)
        for idx, row in enumerate(env.train_rows()):
            info = {"text": row["prompt"], "answer": row["answer"]}
            yield ReverseTextEpisodeTask(ReverseTextEpisodeTaskData(idx=idx, prompt=None, info=info), c.task)


__all__ = ["ReverseTextEpisodeEnv", "ReverseTextEpisodeTaskset"]
