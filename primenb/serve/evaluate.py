"""``%prime_eval``: score served models on an environment's held-out rows, through the endpoint.

Each model is evaluated by verifiers' own evaluation (`primenb.serve.vf_eval`) with the served URL
as its OpenAI client: ``-r`` rollouts of each held-out task, scored by the taskset's rewards (a
primenb environment's reward functions, wrapped as a taskset). Without verifiers installed, the
`openai` client asks the endpoint and the environment's reward functions score the answers, as
the engine's evaluator does. Either way the prompts, rows and scoring are the engine's, so at
temperature 0 a trace's eval here gives the run's own final eval reward. The result says which
evaluator scored (``evaluator``). It is stored with the trace (``evals/<env>.json`` in its run
directory); under ``data_collection = "deny"`` the texts are replaced by keyed hashes, as training
samples are.
"""

from __future__ import annotations

import asyncio
import html
import logging
import math
import time
import warnings
from dataclasses import dataclass, field, fields
from typing import Any

from primenb.aio import run_async
from primenb.commands import PRESENTATION, EvalArgs
from primenb.envs import verifiers_adapter
from primenb.envs.errors import UnsupportedEnvironmentError
from primenb.errors import PrimenbError
from primenb.fsutil import atomic_write_json
from primenb.protocol import openai_api as api
from primenb.protocol.fields import DEFAULT_ANSWER_TOKENS, DEFAULT_MODEL
from primenb.protocol.hashing import redact
from primenb.protocol.privacy import private_while, trace_denies
from primenb.protocol.rundir import RunDir
from primenb.protocol.stage import FINAL, SFT_WARMUP, Stage
from primenb.render.svgchart import Bar, Figure, bar_chart
from primenb.serve import client, episode_eval, eval_stats

log = logging.getLogger("primenb.serve")
MAX_IN_FLIGHT = 64  # rollouts asked at once: the server batches them (its --max-batch) and queues the rest


@dataclass
class Target:
    label: str  # what the user typed
    model_id: str
    trace: Any = None  # a Trace, when the target is one
    stage: Stage = FINAL  # SFT_WARMUP: the model the trace's run trained its adapter on
    role: str = "model"  # "baseline": added to compare the one trace asked for against


def reward_range(lows: list[float], highs: list[float]) -> list[float]:
    """The y range of the bars: from 0 (or the lowest negative end) to the highest end. With every
    reward 0, a range of -1..1 (plotly's own, once) floated a bar of 0 mid-chart: it read as negative."""
    finite = [v for v in (*lows, *highs) if isinstance(v, (int, float)) and math.isfinite(v)]
    lo = min([0.0, *finite])
    hi = max([0.0, *finite])
    return [lo, hi + 0.05 * (hi - lo)] if hi > lo else [0.0, 1.0]


@dataclass
class EvalResult:
    """``table``: one row per model; ``samples``: one row per rollout; ``chart()``: the models
    side by side."""

    env: str
    table: Any
    samples: Any
    server: str
    evaluator: str = "verifiers"  # who scored: "verifiers" (its own evaluation) or "primenb"
    stored: list[str] = field(default_factory=list)
    baseline: str | None = None  # the model compared against, when primenb chose it
    seed: int = EvalArgs.seed  # the eval's seed: each rollout's seed derives from it (see ``samples.seed``)
    server_note: str = ""  # whether this eval started the server, and whether it still runs
    pass_reward: float = EvalArgs.pass_reward  # the reward a rollout needs to count as a pass (pass@k columns)

    def to_json_doc(self) -> dict[str, Any]:
        """Everything `primenb eval --json` prints: how the eval was taken, one summary row per
        model, and every rollout (the samples, as `EvalResult.samples`)."""
        return _finite(
            {
                "env": self.env,
                "server": self.server,
                "evaluator": self.evaluator,
                "seed": self.seed,
                "pass_reward": self.pass_reward,
                "baseline": self.baseline,
                "stored": list(self.stored),
                "summary": self.table.to_dict(orient="records"),
                "samples": self.samples.to_dict(orient="records"),
            }
        )

    def chart(self) -> Figure:
        """The models side by side: each one's mean reward with its 95 % interval, drawn by the one
        chart renderer (`primenb.render.svgchart`)."""
        t = self.table

        def numbers(column: str) -> list[float]:
            return [float(v) if isinstance(v, (int, float)) else math.nan for v in t[column]]

        means, lows, highs = numbers("reward_mean"), numbers("ci95_low"), numbers("ci95_high")
        bars = [Bar(str(m), v, lo, hi) for m, v, lo, hi in zip(t["model"], means, lows, highs, strict=True)]
        lo, hi = reward_range([*lows, *means], [*highs, *means])
        return Figure(
            f"{self.env}: mean reward (95 % CI)", [("mean reward", bar_chart(bars, y_range=(lo, hi), y_label="reward"))]
        )

    def _head(self) -> str:
        base = f"; baseline: {self.baseline}" if self.baseline else ""
        return f"eval on {self.env} via {self.server} ({self.evaluator}, seed {self.seed}{base}){self.server_note}"

    def __repr__(self) -> str:
        return f"{self._head()}\n{self.table.to_string(index=False)}"

    def _repr_html_(self) -> str:
        return f"<div><b>{html.escape(self._head())}</b>{self.table.to_html(index=False)}</div>"


def _targets(refs: list[str], running: list[client.Server]) -> list[Target]:
    """Each ref as a target: a served model id, or a trace (bound to its id once served). One trace
    alone is compared against the model it was trained on: its warm-up when its run had one, else
    its base model."""
    from primenb.traces.trace import TraceNotFound, get

    served = {m for s in running for m in s.models}
    out = []
    for ref in refs:
        if ref in served:
            out.append(Target(ref, ref))
            continue
        try:
            trace = get(ref)
        except TraceNotFound:
            if "/" in ref or ref.startswith("primenb"):  # a base model id: served as itself
                out.append(Target(ref, ref))
                continue
            raise
        out.append(Target(ref, "", trace))
    if len(out) == 1 and out[0].trace is not None:
        trace = out[0].trace
        if client.warmup_of(trace) is not None:
            out.insert(0, Target(f"{trace.name} (SFT warm-up)", "", trace, stage=SFT_WARMUP, role="baseline"))
        else:
            base = str(trace.model.get("id") or DEFAULT_MODEL)
            out.insert(0, Target(base, base, role="baseline"))
    return out


def _serves(server: client.Server, targets: list[Target]) -> bool:
    models = set(server.models)
    for t in targets:
        if t.trace is None and t.model_id not in models:
            return False
        if t.trace is not None and server.model_of(t.trace, t.stage) is None:
            return False
    return True


def _server_for(targets: list[Target]) -> tuple[client.Server, bool]:
    """A running server that serves every target, or a new one (``True``: this eval started it)."""
    for s in client.servers():
        if not s.verified():  # a record is data: its remote part is checked before a prompt goes there
            warnings.warn(
                f"the server record of {s.url} (pid {s.pid}) is not backed by its process; not used", stacklevel=2
            )
            continue
        if _serves(s, targets):
            _bind(targets, s)
            return s, False
    bases = [t.model_id for t in targets if t.trace is None]
    traces = list(dict.fromkeys(t.trace.id for t in targets if t.trace is not None))
    server = client.start(traces, base=bases[0] if bases else None, parents=True)
    missing = [b for b in bases if b not in server.models]
    if missing:
        server.stop()
        raise PrimenbError(f"{', '.join(missing)}: not a trace and not a base model of the traces given")
    _bind(targets, server)
    return server, True


def _bind(targets: list[Target], server: client.Server) -> None:
    for t in targets:
        if t.trace is not None:
            found = server.model_of(t.trace, t.stage)
            if found is None:
                raise PrimenbError(f"{server.url} does not serve {t.label}")
            t.model_id = found


def _env_args(env_id: str, given: dict[str, Any], traces: list[Any]) -> tuple[dict[str, Any], Any]:
    """The arguments given, else those the (first) trace evaluated this environment with: the
    same held-out rows as the run's own eval; and the trace they were read from (None: given)."""
    from primenb.traces.trust import sources

    if given:
        return given, None
    for trace in traces:
        for src in sources(trace, ("eval", "train")):
            if src["env_id"] == env_id:
                return dict(src["args"]), trace
    return {}, None


def _max_tokens(traces: list[Any]) -> int:
    from primenb.harness.inference import _default_tokens

    return max([_default_tokens(t) for t in traces] or [DEFAULT_ANSWER_TOKENS])


async def _ask(aclient: Any, model: str, prompt: str, *, chat: bool, kw: dict[str, Any]) -> tuple[str, int]:
    if chat:
        r = await aclient.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}], **kw)
        return r.choices[0].message.content or "", r.usage.completion_tokens if r.usage else 0
    r = await aclient.completions.create(model=model, prompt=prompt, **kw)
    return r.choices[0].text, r.usage.completion_tokens if r.usage else 0


def evaluate(
    models: list[str], env: str, *, args: dict[str, Any] | None = None, store: bool = True, **settings: Any
) -> EvalResult:
    """Evaluate each model (a trace, or a served model id) on ``env``'s held-out rows with the
    environment arguments ``args``. ``settings`` are `%prime_eval`'s, by name, with its defaults
    (`primenb.commands.EvalArgs`, where they are declared once): ``num_examples``, ``rollouts``,
    ``temperature``, ``max_tokens``, ``seed``, ``pass_reward``, ``keep_server``, ``trust``."""
    declared: Any = EvalArgs  # `_ARGS` makes it a dataclass where the type checker cannot see
    known = {f.name for f in fields(declared)} - {"models", "env", "args", *PRESENTATION}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"evaluate() got unknown settings {unknown}; the settings are {sorted(known)}")
    return run(declared(models=list(models), env=env, **settings), env_args=dict(args or {}), store=store)


def run(e: EvalArgs, *, env_args: dict[str, Any], store: bool = True) -> EvalResult:
    """The eval ``e`` describes: ``e.rollouts`` independent samples of each of ``e.num_examples``
    held-out rows per model, seeded from ``e.seed``. One trace alone is compared against the
    model it was trained on. A server this eval had to start is stopped at the end unless
    ``e.keep_server``. Arguments read from an imported trace reach an environment that is not
    built in or registered here only with ``e.trust``; ``env_args`` (given: they win) replace
    the ones a trace recorded."""
    if e.num_examples < 1 or e.rollouts < 1:
        raise PrimenbError("-n and -r must be at least 1")
    check_sampling(e.temperature, e.max_tokens)
    targets = _targets(list(e.models), client.servers())
    traces = [t.trace for t in targets if t.trace is not None]
    # deny is a property of the run: an eval of a deny trace withholds reward errors' messages too
    private = any(trace_denies(t.doc) for t in traces)
    with private_while(private):
        return _evaluate(targets, traces, e, env_args, store, private)


def check_sampling(temperature: Any, max_tokens: Any) -> None:
    """The eval's sampling values, checked as the server checks a request's (say what to pass)."""
    ok = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    if not ok or not math.isfinite(temperature) or not 0 <= temperature <= 2:
        raise PrimenbError(f"--temperature {temperature!r}: use a number from 0 (greedy) to 2")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise PrimenbError(
            f"--max-tokens {max_tokens!r}: use a whole number of tokens of at least 1 (leave it out for the run's own)"
        )


def _evaluate(
    targets: list[Target], traces: list[Any], e: EvalArgs, given: dict[str, Any], store: bool, private: bool
) -> EvalResult:
    import pandas as pd

    from primenb.traces.trust import check
    from primenb.traces.trust import environment as trusted_environment

    env = e.env
    env_args, recorded_by = _env_args(env, given, traces)
    agent: dict[str, Any] | None = None
    # arguments an imported trace recorded reach only an environment built in or registered here
    try:
        environment = trusted_environment(env, env_args, trace=recorded_by, verb="eval", trust=e.trust)
    except UnsupportedEnvironmentError:
        if not verifiers_adapter.could_be_taskset(env):
            raise
        environment = None  # multi-turn or tools: its tasks are played as episodes (`episode_eval`)
        agent, seated_by = episode_eval.recorded_agent(env, traces)
        check(seated_by, [env], "eval", trust=e.trust)  # a recorded harness is the trace's code too
    rows = environment.eval_rows()[: e.num_examples] if environment is not None else []
    if environment is not None and not rows:
        raise PrimenbError(f"environment {env!r} has no held-out rows to evaluate on")
    server, started = _server_for(targets)
    try:
        summary, samples = _evaluate_on(server, targets, e, env_args, environment, rows, agent)
    finally:
        if started and not e.keep_server:
            server.stop()
    for row in summary:
        row.update(pass_rates_of(samples, row["model"], e.rollouts, e.pass_reward))
    table = pd.DataFrame(summary)
    frame = pd.DataFrame(samples)
    baseline = next((t.model_id for t in targets if t.role == "baseline"), None)
    note = ""
    if started:
        note = f"; started {server.url} for this eval" + (" and kept it" if e.keep_server else " and stopped it")
    out = EvalResult(env, table, frame, server.url, evaluator=summary[0]["evaluator"], baseline=baseline, seed=e.seed)
    out.server_note = note
    out.pass_reward = e.pass_reward
    if store:
        # every setting that changes the numbers: two stored evals differ only where these say why
        taken = {
            "seed": e.seed,
            "pass_reward": e.pass_reward,
            "num_examples": e.num_examples,
            "rollouts": e.rollouts,
            "env_args": redact(env_args),  # the same secret scan as the trace's config
        }
        base = next(((t, r) for t, r in zip(targets, summary, strict=True) if t.role == "baseline"), None)
        for target, row in zip(targets, summary, strict=True):
            if target.trace is not None and target.stage == FINAL:
                compared = None
                if base is not None and base[0] is not target:
                    compared = {
                        "model": base[0].model_id,
                        "summary": base[1],
                        "samples": _mine(samples, base[0].model_id, private),
                    }
                out.stored.append(
                    _store(
                        target.trace,
                        env,
                        row,
                        _mine(samples, target.model_id, private),
                        target.model_id,
                        e.temperature,
                        taken,
                        compared,
                    )
                )
    return out


def pass_rates_of(samples: list[dict[str, Any]], model: str, rollouts: int, threshold: float) -> dict[str, float]:
    return eval_stats.pass_rates([s for s in samples if s["model"] == model], rollouts, threshold)


def _evaluate_on(
    server: client.Server,
    targets: list[Target],
    e: EvalArgs,
    env_args: dict[str, Any],
    environment: Any,
    rows: list[dict[str, Any]],
    agent: dict[str, Any] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    traces = [t.trace for t in targets if t.trace is not None]
    shared = int(e.max_tokens or _max_tokens(traces))  # the base models get the longest budget
    evaluator = "verifiers" if _verifiers_installed() else "primenb"
    if environment is None:
        evaluator = episode_eval.EVALUATOR
    summary: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    for target in targets:
        # a trace answers with its own run's token budget: the same completions as its own eval
        tokens = int(e.max_tokens or (_max_tokens([target.trace]) if target.trace is not None else shared))
        if environment is None:
            records, wall = episode_eval.rollouts(server, target.model_id, e, env_args, tokens, agent=agent)
        elif evaluator == "verifiers":
            records, wall = _verifiers_rollouts(server, target, e, env_args, environment, len(rows), tokens)
        else:
            records, wall = _primenb_rollouts(server, target, environment, rows, e, tokens)
        rewards = [r["reward"] for r in records]
        mean, lo, hi = eval_stats.interval(records)
        names = list(dict.fromkeys(n for r in records for n in r["rewards"]))
        summary.append(
            {
                "model": target.model_id,
                "role": target.role,
                "reward_mean": mean,
                "reward_std": eval_stats.stdev(rewards),
                "ci95_low": lo,
                "ci95_high": hi,
                "n": len(rewards),
                "examples": len(eval_stats.per_example(records)),
                "rollouts": e.rollouts,
                "max_tokens": tokens,  # each target's own budget: part of how its numbers were taken
                **{f"reward/{n}": eval_stats.mean(r["rewards"].get(n, 0.0) for r in records) for n in names},
                # measured speeds to the digit that means something (a table of 17-digit floats reads as noise)
                "tokens_per_s": round(sum(r["tokens"] for r in records) / wall, 1)
                if wall > 0 and environment is not None
                else float("nan"),  # the eval client's episodes carry no token counts
                "wall_s": round(wall, 2),
                "evaluator": evaluator,
                **episode_eval.summary_columns(records),
            }
        )
        samples.extend(
            {
                "model": target.model_id,
                "example": r["example"],
                "rollout": r["rollout"],
                "seed": r["seed"],
                "prompt": _escaped(r["prompt"]),
                "completion": _escaped(r["completion"]),
                "answer": _escaped(r["answer"]),
                "reward": r["reward"],
                **{k: r[k] for k in episode_eval.SAMPLE_FIELDS if k in r},
            }
            for r in records
        )
    return summary, samples


def _escaped(text: Any) -> str:
    return str(text).encode("unicode_escape").decode("ascii")


def _verifiers_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("verifiers") is not None


def _verifiers_rollouts(
    server: client.Server,
    target: Target,
    e: EvalArgs,
    env_args: dict[str, Any],
    environment: Any,
    num_examples: int,
    tokens: int,
) -> tuple[list[dict[str, Any]], float]:
    """verifiers' own evaluation (`primenb.serve.vf_eval`) with the served URL as its client."""
    from primenb.serve import vf_eval

    card = _model_card(server, target.model_id)
    return vf_eval.rollouts(
        taskset=vf_eval.taskset_config(e.env, env_args, environment),
        model=target.model_id,
        base_url=server.url,
        api_key_var=server.api_key_var or "PRIMENB_SERVE_NO_KEY",
        num_examples=num_examples,
        rollouts=e.rollouts,
        sampling={"temperature": e.temperature, "max_tokens": tokens},
        seed=e.seed,
        # a model shown raw text gets the environment's prompt format, as the engine shows it
        text_prompt=card.get("prompt_format") == "raw",
    )


def _model_card(server: client.Server, model_id: str) -> dict[str, Any]:
    """primenb's part of the served model's card (how the server shows it chat messages)."""
    from urllib.parse import quote

    card = client._admin(server, "GET", f"{api.MODELS}/{quote(model_id, safe='/')}")
    extra = card.get("primenb") if isinstance(card, dict) else None
    return extra if isinstance(extra, dict) else {}


def _primenb_rollouts(
    server: client.Server, target: Target, environment: Any, rows: list[dict[str, Any]], e: EvalArgs, tokens: int
) -> tuple[list[dict[str, Any]], float]:
    """Without verifiers: the `openai` client and the environment's reward functions, scored
    exactly as the engine's evaluator scores."""
    import openai

    prompts = [str(environment.format_prompt(r["prompt"], chat=False)) for r in rows]
    key = client._headers(server).get("Authorization", "Bearer none")[7:]
    seeds = [eval_stats.rollout_seed(e.seed, i % len(rows), i // len(rows)) for i in range(len(rows) * e.rollouts)]

    async def run() -> tuple[list[tuple[str, int]], float]:
        aclient = openai.AsyncOpenAI(base_url=server.url, api_key=key, max_retries=0, timeout=600)
        kw: dict[str, Any] = {"max_tokens": tokens, "temperature": e.temperature}
        sem = asyncio.Semaphore(MAX_IN_FLIGHT)

        async def ask(i: int) -> tuple[str, int]:
            async with sem:
                prompt = prompts[i % len(prompts)]
                return await _ask(aclient, target.model_id, prompt, chat=False, kw={**kw, "seed": seeds[i]})

        t0 = time.perf_counter()
        answers = await asyncio.gather(*(ask(i) for i in range(len(prompts) * e.rollouts)))
        wall = time.perf_counter() - t0
        await aclient.close()
        return list(answers), wall

    answers, wall = run_async(run())
    texts = [a for a, _ in answers]
    all_rows = [rows[i % len(rows)] for i in range(len(texts))]
    all_prompts = [prompts[i % len(prompts)] for i in range(len(texts))]
    per_func, rewards = _score_all(environment, all_rows, texts)
    return [
        {
            "example": i % len(rows),
            "rollout": i // len(rows),
            "prompt": all_prompts[i],
            "completion": texts[i],
            "answer": str(all_rows[i].get("answer", "")),
            "rewards": {n: v[i] for n, v in per_func.items()},
            "reward": rewards[i],
            "tokens": answers[i][1],
            "seed": seeds[i],
        }
        for i in range(len(texts))
    ], wall


def _score_all(
    environment: Any, rows: list[dict[str, Any]], texts: list[str]
) -> tuple[dict[str, list[float]], list[float]]:
    """Each completion scored as ``env add`` scores it (`score_each`): each reward call bounded in
    time, a raise or a non-finite value scored 0.0 (its error text withheld under deny); a reward
    that does not return stops the eval with what to fix, instead of hanging the kernel."""
    from primenb.envs.catalog import REWARD_CALL_TIMEOUT, score_each

    names = list(dict.fromkeys(environment.reward_names()))  # one column per name, as `score_each` keys them
    per_func: dict[str, list[float]] = {n: [] for n in names}
    failed: dict[str, list[str]] = {}
    totals = []
    for row, text in zip(rows, texts, strict=True):
        total, by_func = score_each(environment, row, text)
        for name in names:
            value = by_func.get(name, 0.0)
            if isinstance(value, str):  # its error text (`error_text`: the type only under deny)
                failed.setdefault(name, []).append(value)
            if isinstance(value, str) and value.startswith("RewardTimeout"):
                raise PrimenbError(
                    f"reward function {name!r} did not return within {REWARD_CALL_TIMEOUT:g} s; the eval "
                    "stopped. A reward must return for every completion: fix the function (a network "
                    "call without a timeout, an endless loop) and run the eval again"
                )
            per_func[name].append(value if isinstance(value, float) else 0.0)
        totals.append(total)
    for name, errors in failed.items():
        log.warning(
            "reward function %r failed on %d of %d completions (scored 0.0): %s",
            name,
            len(errors),
            len(texts),
            errors[0],
        )
    return per_func, totals


def _finite(doc: Any) -> Any:
    """``doc`` with NaN and infinities as null (a reward's 1e308 summed is inf: not JSON)."""
    import json

    return json.loads(json.dumps(doc, default=str), parse_constant=lambda _: None)


def _mine(samples: list[dict[str, Any]], model_id: str, private: bool) -> list[dict[str, Any]]:
    """One model's rollouts, as stored: hashed and measured exactly as the engine's training
    samples are when the run's data collection is private."""
    from primenb.protocol.privacy import withhold_sample

    mine = [s for s in samples if s["model"] == model_id]
    return [withhold_sample(s) for s in mine] if private else mine


def _store(
    trace: Any,
    env: str,
    row: dict[str, Any],
    mine: list[dict[str, Any]],
    model_id: str,
    temp: float,
    taken: dict[str, Any],
    baseline: dict[str, Any] | None,
) -> str:
    """``evals/<env>.json`` in the trace's run directory: the latest eval of that environment, how
    it was taken (``taken``, the temperature, each model's ``max_tokens`` in its summary) and the
    model it was compared against, with its samples (``baseline``)."""
    from primenb.protocol.documents import EVAL_VERSION

    path = RunDir(trace.run_dir).eval_file(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "version": EVAL_VERSION,
        "env": env,
        "model": model_id,
        "temperature": temp,
        "max_tokens": row.get("max_tokens"),
        **taken,
        "created": time.time(),
        "summary": row,
        "samples": mine,
        "baseline": baseline,
    }
    doc = _finite(doc)
    atomic_write_json(path, doc)
    return str(path)


__all__ = ["EvalResult", "evaluate", "run"]
