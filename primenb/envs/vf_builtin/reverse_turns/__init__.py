"""reverse-turns: reverse one word per turn, with feedback between turns (primenb's built-in
multi-turn verifiers taskset; the embedded model learns it offline).

Each task is a scripted conversation of ``turns`` user turns. The first asks to reverse a word;
each later one says whether the previous reply was right ("Correct." or "Not quite: it is
<answer>.") and gives the next word. The taskset's own ``Env`` plays the user through one
interaction (``interaction.turn``), as upstream's ``alphabet-sort`` does; the task has no prompt.
Reward: the mean over turns of the similarity (``difflib`` ratio) of each reply to its reversed
word, so 1.0 is every turn exact. ``info["ideal"]`` holds the conversation with ideal replies
(an SFT warm-up trains on it).

``split = "eval"`` draws its words from another seed and never repeats a word of the training
split's first ``train_tasks`` tasks (same ``seed``, ``turns`` and lengths).
"""

from __future__ import annotations

import difflib
import random
import string
from collections.abc import Iterator

import verifiers.v1 as vf

EVAL_SEED_OFFSET = 1_000_003


class ReverseTurnsConfig(vf.TasksetConfig):
    turns: int = 2
    """User turns (words) per episode."""
    min_len: int = 3
    max_len: int = 5
    num_tasks: int = 2000
    seed: int = 0
    split: str = "train"
    """``train`` or ``eval`` (held-out words)."""
    train_tasks: int = 10_000
    """The eval split avoids every word of the training split's first ``train_tasks`` tasks."""


class ReverseTurnsTaskData(vf.TaskData):
    info: dict
    """``words`` (one per turn) and ``ideal`` (the conversation with every reply right)."""


def score(reply: str, word: str) -> float:
    return difflib.SequenceMatcher(None, (reply or "").strip(), word[::-1]).ratio()


def user_turn(turn: int, word: str, previous: str | None, reply: str | None) -> str:
    ask = f"Reverse: {word}"
    if turn == 0 or previous is None:
        return ask
    verdict = "Correct." if (reply or "").strip() == previous[::-1] else f"Not quite: it is {previous[::-1]}."
    return f"{verdict} {ask}"


class ReverseTurnsTask(vf.Task[ReverseTurnsTaskData]):
    @vf.reward(weight=1.0)
    async def reversed_words(self, trace: vf.Trace) -> float:
        words = self.data.info["words"]
        replies = [m.content or "" for m in trace.assistant_messages]
        return sum(score(replies[t] if t < len(replies) else "", w) for t, w in enumerate(words)) / len(words)

    @vf.metric
    async def exact_turns(self, trace: vf.Trace) -> float:
        words = self.data.info["words"]
        replies = [(m.content or "").strip() for m in trace.assistant_messages]
        return float(sum(1 for t, w in enumerate(words) if t < len(replies) and replies[t] == w[::-1]))


class ReverseTurnsEnv(vf.SingleAgentEnv):
    """Plays each task's user turns, each with feedback on the reply before it."""

    async def run(self, task, agents):
        words = task.data.info["words"]
        async with agents.agent.interaction(task) as interaction:
            reply: str | None = None
            for t, word in enumerate(words):
                message = user_turn(t, word, words[t - 1] if t else None, reply)
                segment = await interaction.turn(message)
                if segment.terminated:
                    break
                reply = segment.last_reply


def _words(config: ReverseTurnsConfig) -> Iterator[list[str]]:
    if config.split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {config.split!r}")
    if not 1 <= config.min_len <= config.max_len or config.turns < 1:
        raise ValueError("need 1 <= min_len <= max_len and turns >= 1")
    held_out = config.split == "eval"
    train_words: set[str] = set()
    if held_out:  # the training split's words, so none of them is asked again
        rng = random.Random(config.seed)
        for _ in range(config.train_tasks * config.turns):
            train_words.add(_word(rng, config))
    rng = random.Random(config.seed + (EVAL_SEED_OFFSET if held_out else 0))
    while True:
        words: list[str] = []
        while len(words) < config.turns:
            w = _word(rng, config)
            if w not in train_words:
                words.append(w)
        yield words


def _word(rng: random.Random, config: ReverseTurnsConfig) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(config.min_len, config.max_len)))


def ideal_conversation(words: list[str]) -> list[dict[str, str]]:
    messages: list[dict[str, str]] = []
    for t, word in enumerate(words):
        previous = words[t - 1] if t else None
        messages.append({"role": "user", "content": user_turn(t, word, previous, previous[::-1] if previous else None)})
        messages.append({"role": "assistant", "content": word[::-1]})
    return messages


class ReverseTurnsTaskset(vf.Taskset[ReverseTurnsTask, ReverseTurnsConfig]):
    def load(self) -> Iterator[ReverseTurnsTask]:
        c = self.config
        for idx, words in zip(range(c.num_tasks), _words(c), strict=False):
            info = {"words": words, "ideal": ideal_conversation(words)}
            yield ReverseTurnsTask(ReverseTurnsTaskData(idx=idx, prompt=None, info=info), c.task)


__all__ = ["ReverseTurnsEnv", "ReverseTurnsTaskset"]
