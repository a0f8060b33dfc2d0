"""GRPO on verifiers' own episodes: TRL's ``rollout_func`` for episode environments.

Each row TRL hands over names a task (`primenb.envs.episode_env`); a run of equal rows is one
GRPO group, played as verifiers plays it (``env.slots(task, k)``, ``env.run_slot``), with its
training client calling the policy served inside this process (`PolicyServer`: the module being
trained, its adapter active, in eval mode while the episodes run).

An episode becomes one sample the way prime-rl builds its samples (a verifiers ``Branch``: the
nodes of one root-to-leaf path, concatenated): the prompt is every token before the first sampled
one, the completion all the rest; ``env_mask`` is 1 on the tokens the model sampled and 0 on
everything the environment wrote between turns (user turns, tool results, template scaffold), so
those never get gradient; ``logprobs`` are the sampling logprobs (0.0 off the mask). The reward is
verifiers' own score of the episode. An episode with several trainable branches (a harness that
compacts its context) gives its longest; one that failed before the model spoke gives an empty
sample with no reward (TRL leaves it out of the group's baseline and its advantage is 0).

A stop asked for while a step's episodes run (``should_stop``, polled every ``STOP_POLL_S``)
cancels them: the policy server ends its generations in flight, the episode tasks are cancelled,
and `StepCancelled` leaves TRL's step before anything is trained on the partial episodes.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primenb.engine.policy_server import PolicyServer
from primenb.envs.episode_env import EpisodeEnvironment
from primenb.envs.vf_episodes import Episode, episode, keep_runtime_folders_home, model_context, run_slots

log = logging.getLogger("primenb.engine")

POLICY_KEY_VAR = "PRIMENB_POLICY_SERVER_KEY"
MAX_CONCURRENT = 32
STOP_POLL_S = 0.25  # how often a step's episodes check for a stop request
CANCEL_WAIT_S = 30.0  # how long cancelled episodes get to unwind (close connections, leave contexts)


class StepCancelled(Exception):
    """A stop was requested while a step's episodes ran: they were cancelled, the step is not trained."""


@dataclass
class Sample:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]
    logprobs: list[float]
    reward: float | None
    truncated: bool = False


@dataclass
class EpisodeStats:
    """What the episodes of one step did, for the step's metrics row."""

    episodes: int = 0
    turns: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    failed: int = 0
    truncated: int = 0
    branches_dropped: int = 0
    errors: list[str] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        n = max(1, self.episodes)
        return {
            "episodes/turns": self.turns / n,
            "episodes/tool_calls": self.tool_calls / n,
            "episodes/tool_errors": self.tool_errors / n,
            "episodes/failed": self.failed / n,
            "episodes/truncated": self.truncated / n,
            "episodes/branches_dropped": self.branches_dropped / n,
        }


def branch_sample(trace: Any, reward: float | None, pad_id: int) -> tuple[Sample, int]:
    """The sample of ``trace``'s longest trainable branch, and how many other trainable branches
    with sampled tokens it leaves out."""
    branches = [b for b in trace.branches if b.trainable and any(b.sampled_mask)]
    if not branches:
        return Sample([pad_id], [pad_id], [0], [0.0], None), 0
    best = max(branches, key=lambda b: len(b.token_ids))
    ids, mask, lps = best.token_ids, best.sampled_mask, best.logprobs
    first = mask.index(True)
    return (
        Sample(
            prompt_ids=list(ids[:first]),
            completion_ids=list(ids[first:]),
            env_mask=[int(m) for m in mask[first:]],
            logprobs=[float(x) for x in lps[first:]],
            reward=reward,
            truncated=bool(trace.is_truncated),
        ),
        len(branches) - 1,
    )


def cut(sample: Sample, limit: int) -> Sample:
    """At most ``limit`` tokens in all: the completion's tail goes (prime-rl's ``seq_len``). A
    prompt that alone fills ``limit`` keeps one completion token, off the mask."""
    room = limit - len(sample.prompt_ids)
    if room >= len(sample.completion_ids):
        return sample
    if room < 1:
        return Sample(sample.prompt_ids, sample.completion_ids[:1], [0], [0.0], sample.reward, truncated=True)
    return Sample(
        sample.prompt_ids,
        sample.completion_ids[:room],
        sample.env_mask[:room],
        sample.logprobs[:room],
        sample.reward,
        truncated=True,
    )


class _Loop:
    """One event loop on its own thread for the whole run: each environment's serving resources
    (the interception server, shared tool servers) start once, not every step."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="primenb-episodes", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def run_unless(self, coro: Coroutine[Any, Any, Any], stop: Callable[[], bool], on_stop: Callable[[], None]) -> Any:
        """``coro``'s result, or, once ``stop()`` says so: ``on_stop()``, the task cancelled and
        waited for (bounded), and `StepCancelled`."""
        task = self.run(_as_task(coro))
        while not self.run(_settled(task, STOP_POLL_S)):
            if stop():
                on_stop()
                self.loop.call_soon_threadsafe(task.cancel)
                if not self.run(_settled(task, CANCEL_WAIT_S)):
                    log.warning("cancelled episodes were still unwinding after %.0f s", CANCEL_WAIT_S)
                raise StepCancelled("stop requested while the step's episodes ran")
        return self.run(_result(task))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


async def _as_task(coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    return asyncio.get_running_loop().create_task(coro)


async def _settled(task: asyncio.Task[Any], timeout: float) -> bool:
    await asyncio.wait({task}, timeout=timeout)
    return task.done()


async def _result(task: asyncio.Task[Any]) -> Any:
    return await task


class EpisodeRollouts:
    """TRL's ``rollout_func(prompts, trainer)`` over episode environments; `close` at the end."""

    def __init__(
        self,
        envs: dict[str, EpisodeEnvironment],
        tokenizer: Any,
        tokenizer_dir: Path,
        *,
        temperature: float,
        max_turn_tokens: int | None,
        seq_len: int,
        private: bool = False,
        should_stop: Callable[[], bool] | None = None,
    ) -> None:
        self.envs = envs  # source name -> its environment
        self.tokenizer = tokenizer
        self.tokenizer_dir = tokenizer_dir
        self.temperature = temperature
        self.max_turn_tokens = max_turn_tokens
        self.seq_len = seq_len
        self.private = private  # data_collection = "deny": error messages (they may quote text) not logged
        self.should_stop = should_stop  # polled while a step's episodes run; None: only between steps
        self.by_label = {
            row["prompt"]: (name, env, env.task(row["info"])) for name, env in envs.items() for row in env.train_rows()
        }
        rows = sum(len(env.train_rows()) for env in envs.values())
        if len(self.by_label) != rows:  # a row TRL hands back must name exactly one task
            raise ValueError(f"episode sources {', '.join(envs)} label some tasks alike: give each source its own name")
        self.stats = EpisodeStats()
        self.server: PolicyServer | None = None
        self._loop: _Loop | None = None
        self._serving: list[Any] = []
        self._ctx: Any = None

    # -- lifetime ----------------------------------------------------------------------------------
    def _start(self, model: Any) -> None:
        self.server = PolicyServer(model, self.tokenizer).start()
        os.environ[POLICY_KEY_VAR] = self.server.api_key  # verifiers' client reads its key by name
        sampling: dict[str, Any] = {"temperature": self.temperature}
        if self.max_turn_tokens:
            sampling["max_tokens"] = self.max_turn_tokens
        self._ctx = model_context(
            base_url=self.server.base_url,
            model=self.server.served_id,
            tokenizer=self.tokenizer_dir,
            sampling=sampling,
            api_key_var=POLICY_KEY_VAR,
        )
        keep_runtime_folders_home()
        self._loop = _Loop()
        for env in self.envs.values():
            serving = env.vf_env.serving()
            self._loop.run(serving.__aenter__())
            self._serving.append(serving)

    def close(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None:
            for serving in reversed(self._serving):
                try:
                    loop.run(serving.__aexit__(None, None, None))
                except Exception as exc:  # closing must not hide the run's own result
                    log.warning("closing an environment's serving resources failed: %s", exc)
            self._serving.clear()
            loop.close()
        if self.server is not None:
            self.server.close()
            self.server = None
        os.environ.pop(POLICY_KEY_VAR, None)

    # -- one generation step -----------------------------------------------------------------------
    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        model = trainer.accelerator.unwrap_model(trainer.model)
        if self.server is None:
            self._start(model)
        assert self._loop is not None
        groups = _groups([self.by_label[str(p)] for p in prompts])
        slots = [(env.vf_env, slot) for _, env, task, k in groups for slot in env.vf_env.slots(task, k)]
        was_training = model.training
        model.eval()
        try:
            gate = asyncio.Semaphore(MAX_CONCURRENT)
            episodes = run_slots(slots, self._ctx, gate)
            raw = self._loop.run(episodes) if self.should_stop is None else self._run_stoppable(episodes, len(slots))
        finally:
            model.train(was_training)
        out = self._samples([episode(ep, i) for i, ep in enumerate(raw)])
        metrics = getattr(trainer, "_metrics", None)  # TRL averages these into its logged row
        if isinstance(metrics, dict) and "train" in metrics:
            for key, value in self.stats.metrics().items():
                metrics["train"][key].append(value)
        return out

    def _run_stoppable(self, episodes: Coroutine[Any, Any, Any], count: int) -> Any:
        assert self._loop is not None and self.server is not None and self.should_stop is not None
        server = self.server
        answered = server.answered
        try:
            return self._loop.run_unless(episodes, self.should_stop, server.stop_generating)
        except StepCancelled:
            log.warning(
                "stop requested during a step: its %d episodes were cancelled after %d policy answers; "
                "the step is not trained",
                count,
                server.answered - answered,
            )
            raise

    def _samples(self, episodes: list[Episode]) -> dict[str, Any]:
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        out: dict[str, list[Any]] = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask")}
        rewards: list[float | None] = []
        stats = EpisodeStats()
        for ep in episodes:
            run = next((r for r in ep.runs if r.trainable and r.trace is not None), None)
            reward = run.reward if run is not None and ep.ok and run.ok else None
            if reward is not None and not math.isfinite(reward):  # kept out of the group's baseline
                reward = None
            if run is None:
                sample, dropped = Sample([pad], [pad], [0], [0.0], None), 0
            else:
                sample, dropped = branch_sample(run.trace, reward, pad)
            sample = cut(sample, self.seq_len)
            stats.episodes += 1
            stats.turns += len(ep.turns)
            stats.tool_calls += ep.tool_calls
            stats.tool_errors += sum(1 for r in ep.runs for m in r.messages if _tool_error(m))
            stats.failed += int(sample.reward is None)
            stats.truncated += int(sample.truncated)
            stats.branches_dropped += dropped
            shown_error = "type" if self.private else "message"
            stats.errors += [str(e.get(shown_error) or e.get("type"))[:300] for e in ep.errors[:1]]
            out["prompt_ids"].append(sample.prompt_ids)
            out["completion_ids"].append(sample.completion_ids)
            out["logprobs"].append(sample.logprobs)
            out["env_mask"].append(sample.env_mask)
            rewards.append(sample.reward)
        self.stats = stats
        if stats.failed:
            log.warning("%d of %d episodes failed: %s", stats.failed, stats.episodes, "; ".join(stats.errors[:3]))
        shown = [self.tokenizer.decode(ids, skip_special_tokens=False) for ids in out["prompt_ids"]]
        return {**out, "episode_reward": rewards, "episode_prompt": shown}


def _groups(items: list[tuple[str, EpisodeEnvironment, Any]]) -> list[tuple[str, EpisodeEnvironment, Any, int]]:
    """Runs of the same task (TRL repeats each prompt ``num_generations`` times in a row): one
    verifiers group each."""
    out: list[tuple[str, EpisodeEnvironment, Any, int]] = []
    for name, env, task in items:
        if out and out[-1][2] is task:
            out[-1] = (name, env, task, out[-1][3] + 1)
        else:
            out.append((name, env, task, 1))
    return out


def _tool_error(message: dict[str, Any]) -> bool:
    """verifiers returns a failed tool call to the model as text: its chat program writes
    ``error: ...`` and an MCP server's exception comes back as ``Error executing tool ...``."""
    if message.get("role") != "tool":
        return False
    content = message.get("content")
    text = content if isinstance(content, str) else str(content or "")
    return text.lstrip().lower().startswith(("error", "tool error", "traceback"))


def episode_reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
    """The reward function of episode sources: verifiers' score of each episode."""
    values = kwargs.get("episode_reward") or [None] * len(prompts)
    return [None if v is None else float(v) for v in values]


__all__ = ["EpisodeRollouts", "EpisodeStats", "Sample", "StepCancelled", "branch_sample", "cut", "episode_reward"]
