"""TrainerCallbacks that write the run directory: metrics, samples, checkpoints, eval, stop."""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from primenb.engine.evaluation import Evaluator
from primenb.engine.plan import Plan
from primenb.engine.stop import StopFlag
from primenb.envs import Environment, completion_text, prompt_text
from primenb.envs.errors import RewardFunctionError
from primenb.protocol import metrics as M
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.privacy import denies, error_text, withhold_sample
from primenb.protocol.rundir import SFT_WARMUP, TRAINING, JsonlWriter, RunDir, StatusFile, finite_numbers

log = logging.getLogger("primenb.engine")

SAMPLES_PER_STEP = 8
# SFT samples are extra greedy generations on the training thread: at most this share of the wall
# time since the previous sample set goes to them (issue 11: every 10 steps cost ~8% of throughput).
SFT_SAMPLE_TIME_SHARE = 0.02
_TOKEN_COUNTERS = ("num_tokens", "num_input_tokens_seen")


@contextmanager
def rng_isolated() -> Iterator[None]:
    """Run side work (eval, sample sets) without touching the training's random streams: torch
    (CPU and the current GPU), Python's and NumPy's states are restored afterwards, so when the
    work runs (the sample budget follows the wall clock) cannot change what trains."""
    import random

    import numpy as np

    py_state, np_state = random.getstate(), np.random.get_state()
    devices = [torch.cuda.current_device()] if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    try:
        with torch.random.fork_rng(devices=devices):
            yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


class StepClock:
    """Seconds primenb's own code takes during training, by part, so `bench/bench_engine.py` can
    show where a step's time goes beside bare TRL's (logged once, at the end of training)."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = {}

    def add(self, part: str, seconds: float) -> None:
        self.parts[part] = self.parts.get(part, 0.0) + seconds

    @contextmanager
    def timing(self, part: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(part, time.perf_counter() - t0)

    def report(self, steps: int, wall_s: float) -> str:
        """``step profile: {...}`` for engine.log: per-step milliseconds of each part."""
        per = {k: round(1000 * v / max(1, steps), 3) for k, v in sorted(self.parts.items())}
        return json.dumps({"steps": steps, "step_ms": round(1000 * wall_s / max(1, steps), 3), "parts_ms": per})


def _dist_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def _all_reduce(value: float, op: str, device: torch.device) -> float:
    if not _dist_ready() or torch.distributed.get_world_size() < 2:
        return value
    t = torch.tensor([value], dtype=torch.float64, device=device)
    reduce_op = torch.distributed.ReduceOp.MAX if op == "max" else torch.distributed.ReduceOp.SUM
    torch.distributed.all_reduce(t, op=reduce_op)
    return float(t.item())


# ---------------------------------------------------------------------------------------------
# shared state of one run


@dataclass
class EngineContext:
    run_dir: RunDir
    plan: Plan
    status: StatusFile
    stop: StopFlag
    is_main: bool
    tokenizer: Any = None
    base: dict[str, Any] = field(default_factory=dict)
    evaluator: Evaluator | None = None
    sample_evaluator: Evaluator | None = None  # SFT: greedy samples
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    metrics: JsonlWriter | None = None
    samples: JsonlWriter | None = None
    saved_steps: set[int] = field(default_factory=set)
    evaluated_steps: set[int] = field(default_factory=set)
    last_eval: dict[str, float] = field(default_factory=dict)
    first_eval: dict[str, float] = field(default_factory=dict)
    train_started: float = 0.0
    trace: Any = None  # primenb.engine.trace.TraceRecorder (rank 0 records)
    trackers: Any = None  # primenb.trackers.Fanout: each metrics row is also sent there
    metric_phase: str = ""  # the "phase" field of every metrics row (see primenb.protocol.rundir)
    clock: StepClock = field(default_factory=StepClock)
    closers: list[Callable[[], None]] = field(default_factory=list)  # what the trainer opened (episode servers)
    chat_trained: bool = False  # trained on conversations rendered by the chat template (episodes)

    def abs_step(self, step: int) -> int:
        """The run's step for the trainer's ``global_step``: a continuation counts on from
        ``primenb.start_step`` (its parent's last step)."""
        return int(step) + self.plan.start_step

    def close_all(self) -> None:
        """Close what training opened, last first; one failure does not keep the rest open."""
        while self.closers:
            try:
                self.closers.pop()()
            except Exception as exc:
                log.warning("closing a training resource failed: %s", exc)

    def open_writers(self) -> None:
        if self.is_main:
            self.metrics = JsonlWriter(self.run_dir.metrics_path)
            self.samples = JsonlWriter(self.run_dir.samples_path)

    def close(self) -> None:
        for w in (self.metrics, self.samples):
            if w is not None:
                w.close()

    def enter_phase(self, phase: str, *, total: int | None = None, metric_phase: str | None = None) -> None:
        """Report a new phase in status.json (its own step count from 0, of ``total``)."""
        if metric_phase is not None:
            self.metric_phase = metric_phase
        self.status.update(phase=phase, phase_step=0, phase_total=total)

    def write_metrics(self, step: int, values: dict[str, Any]) -> None:
        if self.metrics is not None:
            row: dict[str, Any] = finite_numbers(values)
            if row:
                # NaN/inf values are dropped from the row but named, so viewers can warn about them
                nonfinite = sorted(k for k, v in values.items() if isinstance(v, float) and not math.isfinite(v))
                if self.metric_phase:
                    row["phase"] = self.metric_phase
                if nonfinite:
                    row["nonfinite"] = nonfinite
                full = {"step": step, "time": time.time(), **row}
                self.metrics.write(full)
                if self.trackers is not None:  # scalars only: samples never go to a tracker
                    self.trackers.log_row(full)

    def write_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        if self.samples is not None:
            for row in rows:
                if denies(self.plan):
                    row = withhold_sample(row)
                clean = {k: v for k, v in row.items() if v is not None or k == "reward"}
                reward = clean.get("reward")
                if isinstance(reward, float) and reward != reward:  # NaN
                    clean["reward"] = None
                self.samples.write({"step": step, "time": time.time(), **clean})

    # -- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, model: Any, step: int, *, name: str | None = None) -> Path | None:
        """``checkpoints/step_N`` via ``save_pretrained`` (adapter only for PEFT models), written
        to a temporary folder and renamed, then older ones pruned to ``keep_last``. With
        ``name``: ``checkpoints/<name>`` instead, never pruned (the SFT warm-up model)."""
        if not self.is_main or (name is None and step in self.saved_steps):
            return None
        final = self.run_dir.checkpoints / name if name else self.run_dir.checkpoint_dir(step)
        tmp = final.with_name(f".{final.name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        model.save_pretrained(str(tmp))
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(str(tmp))
        written = CheckpointDir(tmp)
        is_adapter = written.is_adapter()
        meta = {
            "step": step,
            "mode": self.plan.mode,
            "model": self.plan.model_name,
            "adapter": is_adapter,
            "base": self.base,
            "run": str(self.run_dir.root),
            "time": time.time(),
        }
        if self.chat_trained:  # so a server shows it chat through its template, as it was trained
            meta["prompt_format"] = "chat_template"
        written.write_meta(meta)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
        log.info("saved checkpoint %s%s", final, " (adapter only)" if is_adapter else "")
        if name is None:
            self.saved_steps.add(step)
            self._prune(keep=final)
            self.status.update(last_checkpoint=str(final), checkpoint_step=step)
        return final

    def _prune(self, keep: Path) -> None:
        keep_last = self.plan.keep_last
        if not keep_last:
            return
        ckpts = [p for _, p in self.run_dir.list_checkpoints()]
        for old in ckpts[: max(0, len(ckpts) - keep_last)]:
            if old != keep:
                shutil.rmtree(old, ignore_errors=True)
                log.info("removed old checkpoint %s (keep_last=%d)", old, keep_last)

    # -- eval -----------------------------------------------------------------------------------
    def evaluate(self, model: Any, step: int, *, prefix: str = "") -> None:
        """Greedy eval, written as a metrics row; ``prefix`` marks the SFT warm-up phase."""
        if not self.is_main or self.evaluator is None:
            return
        if not prefix and step in self.evaluated_steps:
            return
        t0 = time.time()
        with rng_isolated(), self.clock.timing("eval"):
            metrics, _ = self.evaluator.run(model)
        metrics["eval/time_s"] = time.time() - t0
        if prefix:
            self.write_metrics(step, {prefix + k: v for k, v in metrics.items()})
        else:
            self.evaluated_steps.add(step)
            self.last_eval = metrics
            if not self.first_eval:
                self.first_eval = metrics
            self.write_metrics(step, metrics)
        shown = {k: round(v, 4) for k, v in metrics.items() if not k.endswith("num_examples")}
        log.info("%seval at step %d: %s", prefix, step, shown)


# ---------------------------------------------------------------------------------------------
# callbacks


_SIDE_WORK = ("eval", "samples", "checkpoints")  # timed on their own, wherever they run


def _timed(part: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Count a callback method's own time in ``self.ctx.clock`` under ``part`` (eval, sample sets
    and checkpoints inside it count under their own parts, not twice)."""

    def wrap(method: Callable[..., None]) -> Callable[..., None]:
        def timed(self: Any, *args: Any, **kwargs: Any) -> None:
            clock = self.ctx.clock
            side = sum(clock.parts.get(k, 0.0) for k in _SIDE_WORK)
            t0 = time.perf_counter()
            try:
                method(self, *args, **kwargs)
            finally:
                nested = sum(clock.parts.get(k, 0.0) for k in _SIDE_WORK) - side
                clock.add(part, time.perf_counter() - t0 - nested)

        timed.__name__ = method.__name__
        return timed

    return wrap


class RunDirCallback(TrainerCallback):
    """Metrics, status, samples (SFT), eval, checkpoints and stop checks, in one place so the
    order within a step is fixed: record -> eval -> checkpoint -> stop."""

    def __init__(self, ctx: EngineContext, recorder: RewardRecorder | None = None) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self._last_tokens: tuple[float, float] | None = None
        self._sample_budget = SampleBudget(SFT_SAMPLE_TIME_SHARE)

    # train begin/end
    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        ctx = self.ctx
        ranks = int(_all_reduce(1.0, "sum", ctx.device))
        ctx.train_started = time.time()
        ctx.status.update(ranks_seen=ranks, world_size=int(args.world_size), step=ctx.abs_step(state.global_step))
        ctx.enter_phase(TRAINING, total=int(state.max_steps), metric_phase=ctx.plan.mode)
        ctx.status.update(phase_step=int(state.global_step))
        log.info("training: %d rank(s), steps %d..%d", ranks, ctx.abs_step(1), ctx.abs_step(state.max_steps))
        # a continuation starts from weights its parent already evaluated at this step
        if model is not None and not ctx.plan.start_step:
            ctx.evaluate(model, state.global_step)
            self._sft_samples(model, state.global_step, force=True)

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        steps = int(state.global_step)
        log.info("step profile: %s", self.ctx.clock.report(steps, time.time() - self.ctx.train_started))
        if model is not None:
            self.ctx.evaluate(model, self.ctx.abs_step(state.global_step))
            self._sft_samples(model, self.ctx.abs_step(state.global_step), force=True)  # the final model's

    # per step
    @_timed("callbacks")
    def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        ctx, step = self.ctx, self.ctx.abs_step(state.global_step)
        if self.recorder is not None:
            self.recorder.flush(step)
            health = self.recorder.health
            health.end_step(ctx.device)
            failure = health.over_limit()
            if failure is not None:
                ctx.write_metrics(step, health.take_metrics())  # the failing step's counts
                raise RewardFunctionError(failure)
        if model is not None:
            if ctx.evaluator is not None and ctx.plan.eval and step % ctx.plan.eval.interval == 0:
                ctx.evaluate(model, step)
            if step % ctx.plan.sample_every == 0:
                self._sft_samples(model, step, force=False)
            if ctx.plan.ckpt_interval and step % ctx.plan.ckpt_interval == 0:
                with ctx.clock.timing("checkpoints"):
                    ctx.save_checkpoint(model, step)
        ctx.status.update(step=step, phase_step=int(state.global_step), throttle_s=1.0)
        check_stop(ctx, state, control)

    @_timed("callbacks")
    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        if not self.ctx.is_main or not logs:
            return
        values = dict(logs)
        if self.recorder is not None:
            values.update(self.recorder.health.take_metrics())
        now = time.time()
        for key in _TOKEN_COUNTERS:
            tokens = values.get(key)
            if isinstance(tokens, (int, float)):
                prev_t, prev_n = self._last_tokens or (self.ctx.train_started, 0.0)
                if now > prev_t and tokens >= prev_n:
                    values["tokens/s"] = (tokens - prev_n) / (now - prev_t)
                self._last_tokens = (now, float(tokens))
                break
        self.ctx.write_metrics(self.ctx.abs_step(state.global_step), values)
        self.ctx.status.update(  # not an fsync per step
            step=self.ctx.abs_step(state.global_step), phase_step=int(state.global_step), throttle_s=1.0
        )

    def _sft_samples(self, model: Any, step: int, *, force: bool) -> None:
        """Greedy completions for the monitor: always at the start and the end (``force``), in
        between every ``sample_every`` steps while the time budget allows, once per step."""
        ctx, budget = self.ctx, self._sample_budget
        if not ctx.is_main or ctx.sample_evaluator is None or budget.sampled(step):
            return
        if not force and step % ctx.plan.sample_every != 0 and step != ctx.plan.max_steps:
            return
        started = time.monotonic()
        if not force and not budget.allows(started):
            return
        with rng_isolated(), ctx.clock.timing("samples"):
            _, rows = ctx.sample_evaluator.run(model)
        ctx.write_samples(step, rows)
        budget.spent(step, started, time.monotonic())


class SampleBudget:
    """Whether a sample set fits a share of the wall time: its cost (the last set's duration)
    may be at most ``share`` of the time since the last set ended. Before any set, it fits."""

    def __init__(self, share: float) -> None:
        self.share = share
        self.cost = 0.0
        self.last_end: float | None = None
        self.last_step: int | None = None

    def sampled(self, step: int) -> bool:
        """Whether this step already has its set (the last step: on_step_end, then on_train_end)."""
        return self.last_step == step

    def allows(self, now: float) -> bool:
        return self.last_end is None or self.cost <= self.share * (now - self.last_end)

    def spent(self, step: int, started: float, ended: float) -> None:
        self.cost, self.last_end, self.last_step = ended - started, ended, step


def check_stop(ctx: EngineContext, state: Any, control: Any) -> None:
    """At a step boundary: stop when any rank saw a stop request (agreed via all-reduce)."""
    local = 1.0 if ctx.stop.poll() else 0.0
    if _all_reduce(local, "max", ctx.device) > 0 and state.global_step < state.max_steps:
        if not ctx.stop.requested:
            ctx.stop.request("another rank asked to stop")
        ctx.stop.triggered = True
        control.should_training_stop = True


class WarmupCallback(TrainerCallback):
    """The SFT warm-up phase of an RL run: metrics under ``warmup/`` (own step count), an eval
    before it starts, status ``phase = "sft warmup"``, and stop checks."""

    PREFIX = M.WARMUP_PREFIX

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
        self.ctx.status.update(warmup_step=0, warmup_steps=state.max_steps)
        self.ctx.enter_phase(SFT_WARMUP, total=int(state.max_steps), metric_phase=SFT_WARMUP)
        if model is not None:
            self.ctx.evaluate(model, 0, prefix=self.PREFIX)

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self.ctx.status.update(warmup_step=state.global_step, phase_step=int(state.global_step), throttle_s=1.0)
        check_stop(self.ctx, state, control)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        if self.ctx.is_main and logs:
            self.ctx.write_metrics(state.global_step, {self.PREFIX + k: v for k, v in logs.items()})


# TRL computes group means and standard deviations in float32 (max ~3.4e38): a weighted reward
# beyond this would overflow them, turning every advantage of the step into NaN.
TRAIN_REWARD_BOUND = 1e12


class RewardRecorder:
    """Wraps reward functions so the rollouts they score can be written to ``samples.jsonl``.

    TRL calls every reward function on the same batch; the recorder keeps each function's values
    and, at the end of the step, writes up to `SAMPLES_PER_STEP` rollouts with the weighted total.
    """

    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self.weights: dict[str, float] = {}
        self._batch: dict[str, Any] | None = None
        self.health = RewardHealth(ctx.plan.rl.reward_error_limit)
        self._clamped: set[str] = set()

    def wrap(
        self,
        env: Environment,
        func: Callable[..., Any],
        weight: float,
        *,
        name: str,
        source: str | None,
    ) -> Callable[..., list[float | None]]:
        """A TRL reward function named ``name`` that scores rows of ``source`` (all rows when
        None) with ``func`` and returns None for the others."""
        self.weights[name] = weight
        internal = {"trainer_state", "log_extra", "log_metric", "completion_ids", "info", "task", "episode_prompt"}

        clock = self.ctx.clock

        def reward(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
            t0 = time.perf_counter()
            try:
                return score(prompts, completions, **kwargs)
            finally:
                clock.add("reward_wrapper", time.perf_counter() - t0)

        def score(prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
            tasks = kwargs.get("task") or [source] * len(prompts)
            idx = [i for i, t in enumerate(tasks) if source is None or t == source]
            infos = [_decode_info(x) for x in kwargs.get("info") or [None] * len(prompts)]
            cols = {k: v for k, v in kwargs.items() if k not in internal and isinstance(v, list)}
            cols["info"] = infos
            out: list[float | None] = [None] * len(prompts)
            if idx:
                failed_before = getattr(func, "failed", None)
                t_func = time.perf_counter()
                try:
                    values = func(
                        prompts=[prompts[i] for i in idx],
                        completions=[completions[i] for i in idx],
                        **{k: [v[i] for i in idx] for k, v in cols.items()},
                    )
                except Exception as exc:  # an unguarded function (stop_run_on_error): the run stops
                    self.health.count(name, len(idx), len(idx), exc)
                    log.error("reward function %r raised %s: the run stops", name, error_text(exc))
                    raise
                spent = time.perf_counter() - t_func
                clock.add("reward_funcs", spent)
                clock.add("reward_wrapper", -spent)  # the wrapper's own time is the rest
                for i, v in zip(idx, values, strict=True):
                    out[i] = None if v is None else self._bounded(name, float(v), weight)
                if failed_before is not None:  # guarded: failures were scored 0.0 and counted there
                    failed = int(getattr(func, "failed", 0)) - int(failed_before)
                    self.health.count(name, len(idx), failed, getattr(func, "last_error", None))
                else:
                    bad = sum(1 for v in values if v is not None and not math.isfinite(float(v)))
                    self.health.count(name, len(idx), bad, ValueError("returned a non-finite score") if bad else None)
            state = kwargs.get("trainer_state")
            shown = kwargs.get("episode_prompt") or prompts  # an episode: what the model was first shown
            self._record(state, name, shown, completions, kwargs.get("answer"), tasks, out)
            return out

        reward.__name__ = name
        reward.__qualname__ = name
        return reward

    def _bounded(self, name: str, value: float, weight: float) -> float:
        """``value`` kept where TRL's float32 group statistics stay finite (|weight x value| <=
        `TRAIN_REWARD_BOUND`; infinities clamped too, NaN left for TRL to leave out); said once
        per function."""
        if math.isnan(value):
            return value
        bound = TRAIN_REWARD_BOUND / abs(weight) if weight else TRAIN_REWARD_BOUND
        if -bound <= value <= bound:
            return value
        if name not in self._clamped:
            self._clamped.add(name)
            log.warning(
                "reward function %r returned %r: clamped to +-%g so the step's statistics stay finite",
                name,
                value,
                bound,
            )
        return math.copysign(bound, value)

    def _record(
        self,
        state: Any,
        name: str,
        prompts: list[Any],
        completions: list[Any],
        answers: list[Any] | None,
        tasks: list[Any],
        values: list[float | None],
    ) -> None:
        if not self.ctx.is_main or state is None:
            return
        step = self.ctx.abs_step(state.global_step) + 1  # the optimizer step these rollouts feed
        if step % self.ctx.plan.sample_every != 0 and step != 1:
            return
        if self._batch is None or self._batch["step"] != step:
            n = min(SAMPLES_PER_STEP, len(prompts))
            self._batch = {
                "step": step,
                "prompts": prompts[:n],
                "completions": completions[:n],
                "answers": (answers or [None] * n)[:n],
                "tasks": tasks[:n],
                "rewards": {},
            }
        self._batch["rewards"][name] = values[: len(self._batch["prompts"])]

    def flush(self, step: int) -> None:
        batch = self._batch
        if batch is None or batch["step"] > step:
            return
        self._batch = None
        rows = []
        for i, (p, c) in enumerate(zip(batch["prompts"], batch["completions"], strict=True)):
            per_func = {k: v[i] for k, v in batch["rewards"].items()}
            known = [(self.weights.get(k, 1.0), v) for k, v in per_func.items() if v is not None]
            rows.append(
                {
                    "task": batch["tasks"][i],
                    "prompt": prompt_text(p),
                    "completion": completion_text(c),
                    "reward": sum(w * v for w, v in known) if known else None,
                    "rewards": per_func,
                    "answer": batch["answers"][i],
                }
            )
        self.ctx.write_samples(batch["step"], rows)


class RewardHealth:
    """Reward calls and failures per function: counted as TRL scores each batch, summed over the
    ranks at the end of each step, written into the next metrics row (``reward_calls``,
    ``reward_errors``, ``reward_errors/<name>``), and held against ``reward_error_limit``."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.names: list[str] = []
        self._step: dict[str, list[int]] = {}  # name -> [calls, errors] on this rank, this step
        self.total: dict[str, list[int]] = {}  # name -> [calls, errors] on all ranks, whole run
        self.pending: dict[str, list[int]] = {}  # ... since the last metrics row
        self.first_error: dict[str, BaseException] = {}

    def count(self, name: str, calls: int, errors: int, exc: BaseException | None) -> None:
        if name not in self.names:
            self.names.append(name)
        c = self._step.setdefault(name, [0, 0])
        c[0] += calls
        c[1] += errors
        if errors and exc is not None:
            self.first_error.setdefault(name, exc)

    def end_step(self, device: Any) -> None:
        """Sum this step's counts over the ranks (one all-reduce, only with several ranks)."""
        flat = [float(n) for name in self.names for n in self._step.get(name, [0, 0])]
        if _dist_ready() and torch.distributed.get_world_size() > 1 and flat:
            t = torch.tensor(flat, dtype=torch.float64, device=device)
            torch.distributed.all_reduce(t)
            flat = [float(x) for x in t.tolist()]
        for i, name in enumerate(self.names):
            calls, errors = int(flat[2 * i]), int(flat[2 * i + 1])
            for book in (self.total, self.pending):
                c = book.setdefault(name, [0, 0])
                c[0] += calls
                c[1] += errors
        self._step = {}

    def take_metrics(self) -> dict[str, float]:
        """The counts since the last metrics row, as metrics (empty before the first reward call)."""
        if not self.pending:
            return {}
        out: dict[str, float] = {
            M.REWARD_CALLS: float(sum(c for c, _ in self.pending.values())),
            M.REWARD_ERRORS: float(sum(e for _, e in self.pending.values())),
        }
        for name, (_, errors) in self.pending.items():
            out[M.REWARD_ERRORS_PREFIX + name] = float(errors)
        self.pending = {}
        return out

    def over_limit(self) -> str | None:
        """Why the run must stop, when a function's share of failures so far is above the limit."""
        for name, (calls, errors) in self.total.items():
            if calls and errors / calls > self.limit:
                exc = self.first_error.get(name)
                cause = f"; first failure: {error_text(exc)}" if exc is not None else ""
                return (
                    f"reward function {name!r} failed on {errors} of {calls} completions so far "
                    f"({errors / calls:.0%}), above [primenb] reward_error_limit = {self.limit:g}{cause}. "
                    "Fix the function (logs/engine.log has the traceback), or raise reward_error_limit "
                    "to train on the completions it can score"
                )
        return None


def _decode_info(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value else {}
        except json.JSONDecodeError:
            return value
    return value if value is not None else {}


__all__ = [
    "EngineContext",
    "RewardHealth",
    "RewardRecorder",
    "RunDirCallback",
    "SampleBudget",
    "StopFlag",
    "WarmupCallback",
    "check_stop",
]
