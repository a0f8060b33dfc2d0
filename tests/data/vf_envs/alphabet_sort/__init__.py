"""alphabet-sort: keep a list of names sorted across turns (a local taskset of upstream's v1
``alphabet-sort`` shape, for tests: no dataset, a fixed list of names, deterministic).

Each task is a scripted conversation: the first user turn asks for a few names sorted inside
``<sorted>`` tags, each follow-up adds names and asks for the whole list again. The task has no
prompt (``prompt=None``): the env's ``run()`` opens an interaction and plays the user, one
``interaction.turn(message)`` per scripted message, as upstream's ``AlphabetSortEnv`` does. The
reward is the sum over turns of each turn's score (similarity of the tagged list to the sorted
list) divided by the number of turns, so it lies in [0, 1]. With ``turn_log`` (a file path) the
env appends a line to it for each model turn answered, so a test can wait on episodes in flight.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Iterator

import verifiers.v1 as vf

NAMES = [
    "AdaLovelace", "AlanTuring", "GraceHopper", "DonaldKnuth", "BarbaraLiskov", "EdsgerDijkstra",
    "JohnMcCarthy", "FrancesAllen", "KenThompson", "DennisRitchie", "TonyHoare", "RobinMilner",
]  # fmt: skip
TAG = "sorted"


class AlphabetSortConfig(vf.TasksetConfig):
    min_turns: int = 2
    """Fewest user turns (sorts) per episode."""
    max_turns: int = 3
    """Most user turns per episode; each task draws a count in [min_turns, max_turns]."""
    names_per_turn: int = 2
    """Names added on each turn."""
    num_tasks: int = 4
    seed: int = 0
    turn_log: str = ""
    """A file to append a line to after each answered model turn (tests); empty: none."""


class AlphabetSortTaskData(vf.TaskData):
    info: dict
    """``user_turns`` (what the scripted user says, in order) and ``ground_truths`` (the sorted
    list after each turn)."""


def turn_score(reply: str, expected: list[str]) -> float:
    """Similarity (0..1) of the last ``<sorted>`` block of ``reply`` to ``expected``, one name a line."""
    blocks = re.findall(f"<{TAG}>(.*?)</{TAG}>", reply or "", re.DOTALL)
    if not blocks:
        return 0.0
    got = "\n".join(line.strip().lower() for line in blocks[-1].splitlines() if line.strip())
    want = "\n".join(name.lower() for name in expected)
    return difflib.SequenceMatcher(None, got, want).ratio()


class AlphabetSortTask(vf.Task[AlphabetSortTaskData]):
    @vf.reward(weight=1.0)
    async def sorted_lists(self, trace: vf.Trace) -> float:
        truths = self.data.info["ground_truths"]
        replies = [m.content or "" for m in trace.assistant_messages]
        scores = [turn_score(replies[t] if t < len(replies) else "", truth) for t, truth in enumerate(truths)]
        return sum(scores) / len(truths)

    @vf.metric
    async def answered_turns(self, trace: vf.Trace) -> float:
        return float(len(trace.assistant_messages))


class AlphabetSortEnv(vf.SingleAgentEnv):
    """Plays each task's scripted user turns through one interaction."""

    async def run(self, task, agents):
        async with agents.agent.interaction(task) as interaction:
            for message in task.data.info["user_turns"]:
                turn = await interaction.turn(message)
                if task.data.info.get("turn_log"):
                    with open(task.data.info["turn_log"], "a") as log:
                        log.write("turn\n")
                if turn.terminated:
                    break


class AlphabetSortTaskset(vf.Taskset[AlphabetSortTask, AlphabetSortConfig]):
    def load(self) -> Iterator[AlphabetSortTask]:
        c = self.config
        if not 1 <= c.min_turns <= c.max_turns or c.names_per_turn < 1:
            raise ValueError("need 1 <= min_turns <= max_turns and names_per_turn >= 1")
        if c.max_turns * c.names_per_turn > len(NAMES):
            raise ValueError(f"at most {len(NAMES)} names: lower max_turns or names_per_turn")
        rng = random.Random(c.seed)
        for idx in range(c.num_tasks):
            names = rng.sample(NAMES, len(NAMES))
            turns = rng.randint(c.min_turns, c.max_turns)
            user_turns, truths, shown = [], [], []
            for t in range(turns):
                new = names[t * c.names_per_turn : (t + 1) * c.names_per_turn]
                shown += new
                truths.append(sorted(shown))
                head = "Sort these names alphabetically" if t == 0 else "Add these names and sort the whole list again"
                user_turns.append(f"{head}: {', '.join(new)}. Answer inside <{TAG}></{TAG}>, one name a line.")
            yield AlphabetSortTask(
                AlphabetSortTaskData(
                    idx=idx,
                    prompt=None,
                    info={"user_turns": user_turns, "ground_truths": truths, "turn_log": c.turn_log},
                ),
                c.task,
            )


__all__ = ["AlphabetSortEnv", "AlphabetSortTaskset"]
