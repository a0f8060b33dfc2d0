"""verifiers' own evaluation (``verifiers.v1``'s ``run_eval``, what ``vf-eval`` runs) against a
served endpoint, offline.

verifiers 0.4 runs every rollout through a *harness*: a program that talks to the model through
verifiers' interception server, which forwards each call to the eval's client (here the served
URL) and records it on the rollout's trace; the task's ``@vf.reward`` functions then score the
trace. Its built-in chat harness (``null``) prepares its program as a uv script (it installs uv
and the script's packages from the internet), so it cannot run offline. verifiers documents the
other way: a harness may run its loop in-process as long as every model call goes through the
interception ``endpoint`` with its bearer ``secret``. `ChatHarness` does exactly that: one chat
completion of the task's prompt, with the run's model and sampling imposed by verifiers.

What verifiers evaluates is a taskset. A ``%prime_env`` verifiers taskset is evaluated as itself
(its own tasks and rewards, verifiers' scoring); a primenb environment (reverse-text, arithmetic,
a Python environment) is wrapped by `EnvTaskset`: its held-out rows as tasks (the chat prompt the
engine's evaluator uses), its reward functions as the task's rewards (same names and weights).

verifiers resolves harness and taskset ids to top-level modules; this module lives inside primenb,
so `register` puts it in ``sys.modules`` under `PLUGIN` for the in-process eval.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import openai
import verifiers.v1 as vf
from pydantic import Field
from verifiers.v1.configs.cli.eval import EvalConfig, RunConfig
from verifiers.v1.runtimes import ProgramResult

from primenb.aio import run_async
from primenb.envs.vf_episodes import keep_runtime_folders_home
from primenb.errors import PrimenbError
from primenb.serve.eval_stats import rollout_seed

PLUGIN = "primenb_verifiers_eval"


# ---------------------------------------------------------------------------------------------
# the harness: one chat turn, in-process, through verifiers' interception


class ChatHarnessConfig(vf.HarnessConfig):
    """The model and sampling come from the eval (verifiers imposes them on every call)."""

    text_prompt: bool = False
    """Send a primenb task's prompt in its environment's text format as the one user message:
    for a model the server shows chat messages to as raw text (no chat template, no prompt
    format of its own), so it sees what the engine's evaluator shows it."""


class ChatHarness(vf.Harness[ChatHarnessConfig]):
    """One chat completion of the task's prompt, sent to verifiers' interception endpoint."""

    APPENDS_SYSTEM_PROMPT = True  # the system prompt stays a system message
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: Any,
        trace: Any,
        runtime: Any,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: Any,
    ) -> ProgramResult:
        text = getattr(data, "text_prompt", "")
        if self.config.text_prompt and text:
            return await _chat(endpoint, secret, ctx.model, [{"role": "user", "content": text}])
        system, prompt = self.resolve_prompt(data)
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        if isinstance(prompt, str):
            messages.append({"role": "user", "content": prompt})
        else:
            messages.extend(_wire(m) for m in prompt or [])
        return await _chat(endpoint, secret, ctx.model, messages)


async def _chat(endpoint: str, secret: str, model: str, messages: list[dict[str, Any]]) -> ProgramResult:
    """One chat completion through the interception, which records it on the trace."""
    async with openai.AsyncOpenAI(base_url=endpoint, api_key=secret, max_retries=0, timeout=600) as client:
        await client.chat.completions.create(model=model, messages=messages)  # type: ignore[arg-type]
    return ProgramResult(0, "", "")


def _wire(message: Any) -> dict[str, Any]:
    from verifiers.v1.types import content_text

    return {"role": message.role, "content": content_text(getattr(message, "content", None))}


# ---------------------------------------------------------------------------------------------
# a primenb environment as a taskset


class EnvTaskData(vf.TaskData):
    text_prompt: str = ""  # the prompt in the environment's text format (what its rewards see)
    answer: str = ""  # the row's answer, for the samples table


class EnvTask(vf.Task[EnvTaskData]):
    """A held-out row; its rewards are the environment's reward functions, called on that row."""

    environment: Any = None  # set by EnvTaskset.load, with the row (any Python values: not data)
    row: dict[str, Any] | None = None

    def hooks(self, attr: str) -> list[Callable[..., Any]]:
        if attr != "reward":
            return super().hooks(attr)
        env = self.environment
        weights = env.reward_weights or [1.0] * len(env.reward_funcs)
        return [
            _reward(name, func, weight, self.row or {})
            for name, func, weight in zip(env.reward_names(), env.reward_funcs, weights, strict=True)
        ]


def _reward(name: str, func: Callable[..., Any], weight: float, row: dict[str, Any]) -> Callable[..., Any]:
    from verifiers.v1.types import content_text

    from primenb.envs.catalog import REWARD_CALL_TIMEOUT, call_bounded
    from primenb.envs.guard import bounded_term

    cols = {k: [v] for k, v in row.items() if k != "prompt"}

    async def reward(task: EnvTaskData, trace: Any) -> float:
        replies = trace.assistant_messages
        text = content_text(replies[-1].content) if replies else ""  # unstripped, as the engine scores it
        # the same bound and finite-number rule as the primenb evaluator and `env add`
        values = await asyncio.to_thread(
            call_bounded, func, REWARD_CALL_TIMEOUT, prompts=[task.text_prompt], completions=[text], **cols
        )
        value = float(values[0] if values[0] is not None else 0.0)  # as Environment.score counts None
        if not math.isfinite(value):
            return 0.0
        term, clamped = bounded_term(weight, value)  # verifiers sums weight * value: keep it finite
        return term / weight if clamped and weight else value

    reward.__name__ = name
    reward.reward = True  # type: ignore[attr-defined]
    reward._vf_weight = float(weight)  # type: ignore[attr-defined]
    return reward


class EnvTasksetConfig(vf.TasksetConfig):
    env: str = ""
    """The primenb environment id."""
    args: dict[str, Any] = Field(default_factory=dict)
    """Its arguments."""


class EnvTaskset(vf.Taskset[EnvTask, EnvTasksetConfig]):
    """A primenb environment's held-out rows, in order."""

    def load(self) -> list[EnvTask]:
        from primenb.traces.trust import environment

        # `evaluate` built this id with these arguments through the trust road before it got here
        env = environment(self.config.env, self.config.args, verb="eval")
        tasks = []
        for row in env.eval_rows():
            messages = env.format_prompt(row["prompt"], chat=True)
            if isinstance(messages, str):  # chat=True gives messages; kept total for the type checker
                messages = [{"role": "user", "content": messages}]
            data = EnvTaskData(
                prompt=[_message(m) for m in messages],
                text_prompt=str(env.format_prompt(row["prompt"], chat=False)),
                answer=str(row.get("answer", "")),
            )
            task = EnvTask(data, self.config.task)
            task.environment, task.row = env, row
            tasks.append(task)
        return tasks


def _message(m: dict[str, Any]) -> Any:
    role = m.get("role")
    content = str(m.get("content") or "")
    if role == "system":
        return vf.SystemMessage(content=content)
    if role == "assistant":
        return vf.AssistantMessage(content=content)
    return vf.UserMessage(content=content)


__all__ = ["ChatHarness", "EnvTaskset"]


def register() -> None:
    """Make this module importable under the top-level id verifiers' loader resolves."""
    sys.modules.setdefault(PLUGIN, sys.modules[__name__])


# ---------------------------------------------------------------------------------------------
# running verifiers' eval


def taskset_config(env_id: str, args: dict[str, Any], environment: Any) -> dict[str, Any]:
    """The taskset verifiers evaluates: a verifiers taskset as itself, a primenb one wrapped."""
    from primenb.envs.verifiers_adapter import VerifiersEnvironment

    if isinstance(environment, VerifiersEnvironment):
        return {**args, "id": env_id}
    return {"id": PLUGIN, "env": env_id, "args": args}


def rollouts(
    *,
    taskset: dict[str, Any],
    model: str,
    base_url: str,
    api_key_var: str,
    num_examples: int,
    rollouts: int,
    sampling: dict[str, Any],
    seed: int,
    text_prompt: bool = False,
    max_concurrent: int = 64,
) -> tuple[list[dict[str, Any]], float]:
    """Run verifiers' evaluation of ``taskset`` for one served model: one record per rollout
    (``example``, ``rollout``, ``seed``, ``prompt``, ``completion``, ``answer``, ``rewards`` by name,
    the weighted ``reward``, ``tokens``), in example order per rollout, and the wall time. Each
    rollout samples with its own seed (`eval_stats.rollout_seed`): independent, and repeatable.

    The config is verifiers' own ``EvalConfig`` (what ``vf-eval`` parses); the rollouts run as its
    runner runs them (``Env.serving`` / ``slots`` / ``run_slot``), without its run directory or
    platform upload, so nothing of a prompt or a completion lands on disk."""
    register()
    keep_runtime_folders_home()
    config = EvalConfig(
        env={
            "taskset": taskset,
            "agent": {
                "harness": {"id": PLUGIN, "text_prompt": text_prompt},
                "runtime": {"type": "subprocess"},
            },
        },
        run=RunConfig(name="primenb-eval"),
        model=model,
        client={"type": "eval", "base_url": base_url, "api_key_var": api_key_var},
        sampling=sampling,
        select={"limit": num_examples},
        num_rollouts=rollouts,
        max_concurrent=max_concurrent,
        rich=None,
        push=False,
    )
    t0 = time.perf_counter()
    episodes, seeds = run_async(_episodes(config, seed))
    wall = time.perf_counter() - t0
    return _records(episodes, seeds), wall


async def _episodes(config: EvalConfig, seed: int) -> tuple[list[Any], list[int]]:
    """Every rollout, each with a context whose sampling carries that rollout's seed (the harness's
    request passes it through verifiers' interception to the server)."""
    from verifiers.v1.utils.loaders import load_environment

    env = load_environment(config.env)
    tasks = list(env.taskset.select(config.select))
    gate = asyncio.Semaphore(config.max_concurrent or 8)
    plan = []
    for order, task in enumerate(tasks):
        example = task.data.idx if task.data.idx is not None else order
        for rollout, slot in enumerate(env.slots(task, config.num_rollouts)):
            rseed = rollout_seed(seed, example, rollout)
            sampling = type(config.sampling).model_validate(
                {**config.sampling.model_dump(exclude_none=True), "seed": rseed}
            )
            plan.append((slot, vf.ModelContext(model=config.model, client=config.client, sampling=sampling), rseed))
    async with env.serving():
        episodes = await asyncio.gather(*(env.run_slot(slot, ctx, gate) for slot, ctx, _ in plan))
    return list(episodes), [rseed for _, _, rseed in plan]


def _records(episodes: list[Any], seeds: list[int]) -> list[dict[str, Any]]:
    failed = [e for e in episodes if not e.ok]
    if failed:
        errors = [err for e in failed for err in (*e.errors, *(x for t in e.traces for x in t.errors))]
        first = f"{errors[0].type}: {errors[0].message}"[:500] if errors else "no error recorded"
        raise PrimenbError(f"verifiers' evaluation: {len(failed)} of {len(episodes)} rollouts failed (first: {first})")
    seen: dict[int, int] = {}
    out = []
    for order, (episode, seed) in enumerate(zip(episodes, seeds, strict=True)):
        data = episode.task.data
        example = data.idx if data.idx is not None else order
        rollout = seen.get(example, 0)
        seen[example] = rollout + 1
        trace = episode.traces[-1]
        replies = trace.assistant_messages
        usage = trace.usage
        out.append(
            {
                "example": example,
                "rollout": rollout,
                "seed": seed,
                "prompt": getattr(data, "text_prompt", "") or data.prompt_text,
                "completion": (replies[-1].content or "") if replies else "",
                "answer": str(_answer(data)),
                "rewards": {name: r.score for name, r in trace.rewards.items() if r is not None},
                "reward": float(trace.reward),
                "tokens": int(usage.completion_tokens) if usage is not None else 0,
            }
        )
    out.sort(key=lambda r: (r["rollout"], r["example"]))
    return out


def _answer(data: Any) -> Any:
    answer = getattr(data, "answer", "")
    return "" if answer is None else answer
