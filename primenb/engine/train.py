"""Build TRL's GRPOTrainer / SFTTrainer from a `Plan` and run it."""

from __future__ import annotations

import gc
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from transformers import TrainerCallback

from primenb.engine.callbacks import EngineContext, RewardRecorder, RunDirCallback, WarmupCallback
from primenb.engine.chat import chat_text, trains_on_chat
from primenb.engine.data import Source, build_sources, ideal_rows, rl_rows, sft_dataset, sft_env_args
from primenb.engine.episodes import EpisodeRollouts, StepCancelled, episode_reward
from primenb.engine.evaluation import Evaluator
from primenb.engine.models import load_model
from primenb.engine.models_info import is_tiny
from primenb.engine.optim import custom_optimizer
from primenb.engine.plan import Plan, PlanError, grpo_args, sft_args, warmup_plan
from primenb.engine.ranks import world_size
from primenb.envs.episode_env import EpisodeEnvironment
from primenb.protocol.fields import DEFAULT_ANSWER_TOKENS
from primenb.protocol.privacy import denies
from primenb.protocol.rundir import BUILDING_MODEL, BUILDING_TRAINER, SAVING, RunDir, atomic_write_json

if TYPE_CHECKING:
    from trl.trainer.grpo_trainer import RewardFunc

log = logging.getLogger("primenb.engine")

SFT_SAMPLE_PROMPTS = 4
DEFAULT_TURN_TOKENS = 128  # an episode's model turn, when orchestrator sampling sets no max_completion_tokens
WARMUP_CHECKPOINT = RunDir.WARMUP_CHECKPOINT


@dataclass
class TrainResult:
    step: int
    stopped: bool
    final_checkpoint: str | None
    first_eval: dict[str, float]
    last_eval: dict[str, float]


def device_info() -> tuple[bool, bool]:
    """(use CUDA, bf16 supported on it)."""
    cuda = torch.cuda.is_available()
    return cuda, bool(cuda and torch.cuda.is_bf16_supported())


def lora_config(spec: dict[str, Any], model: Any) -> Any:
    """peft ``LoraConfig`` from the prime-rl LoRA fields; target/save module names the model does
    not have are dropped (no target left -> ``"all-linear"``)."""
    from peft import LoraConfig

    linear = {n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    leaves = {n.rsplit(".", 1)[-1] for n, _ in model.named_modules() if n}
    targets = [t for t in spec["target_modules"] if t in linear]
    dropped = sorted(set(spec["target_modules"]) - set(targets))
    if dropped:
        log.info("LoRA: target modules not in this model, ignored: %s", ", ".join(dropped))
    to_save = [m for m in spec["modules_to_save"] if m in leaves]
    return LoraConfig(
        r=spec["r"],
        lora_alpha=spec["lora_alpha"],
        lora_dropout=spec["lora_dropout"],
        target_modules=targets or "all-linear",
        modules_to_save=to_save or None,
        task_type="CAUSAL_LM",
    )


Loaded = tuple[Any, Any, dict[str, Any]]  # model, tokenizer, base description


def _prepare_model(
    plan: Plan, ctx: EngineContext, loaded: Loaded | None = None
) -> tuple[Any, Any, dict[str, Any], Any]:
    """Model, tokenizer, base description and the LoRA config to hand the trainer (or None)."""
    if loaded is None:
        ctx.enter_phase(BUILDING_MODEL)
    model, tok, base = loaded or load_model(plan.model_name, seed=plan.seed, init_from=plan.init_from)
    peft_config = None
    is_peft = hasattr(model, "peft_config")
    if is_peft and plan.lora is None:
        log.info("init_from is a LoRA adapter and this run has no LoRA: merging it into the base")
        model = model.merge_and_unload()
    elif is_peft:
        log.info("init_from is a LoRA adapter: training it further (model.lora settings unused)")
    elif plan.lora is not None:
        peft_config = lora_config(plan.lora, model)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model %s: %s parameters, base %s", plan.model_name, f"{n_params:,}", base)
    ctx.enter_phase(BUILDING_TRAINER)
    return model, tok, base, peft_config


def _write_trainer_args(
    ctx: EngineContext, kind: str, args: dict[str, Any], notes: list[str], *, file: str = "trainer_args"
) -> None:
    for note in notes:
        log.warning("%s", note)
    if ctx.is_main:
        atomic_write_json(
            ctx.run_dir.config_file(f"{file}.json"),
            {"trainer": kind, "args": args, "notes": notes},
        )
    ctx.status.update(notes=[*ctx.status.data.get("notes", []), *notes])
    log.info("%s arguments: %s", kind, json.dumps(args, default=str, sort_keys=True))


def _apply_optimizer(trainer: Any, plan: Plan) -> None:
    custom = custom_optimizer(plan.optim)
    if custom is not None:
        trainer.optimizer_cls_and_kwargs = custom
        log.info("optimizer: %s (%s)", plan.optim.type, custom[0].__name__)


def _eval_tokens(plan: Plan, default: int) -> int:
    if plan.eval and plan.eval.max_completion_tokens:
        return int(plan.eval.max_completion_tokens)
    return default


def _longest_prompt(tok: Any, rows: list[dict[str, Any]], chat: bool) -> int:
    sample = [r["prompt"] for r in rows[:2000]]
    if chat:
        sample = [chat_text(tok, p) for p in sample]
    return max((len(tok(t, add_special_tokens=not chat)["input_ids"]) for t in sample), default=0)


def build_grpo(
    plan: Plan,
    ctx: EngineContext,
    extra_callbacks: list[TrainerCallback],
    loaded: Loaded | None = None,
) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, tok, base, peft_config = _prepare_model(plan, ctx, loaded)
    ctx.tokenizer, ctx.base = tok, base
    chat = trains_on_chat(tok)
    sources = build_sources(plan.sources)
    if ctx.trace is not None:
        ctx.trace.record_model(model, peft_config, base)
        ctx.trace.record_data("train", plan.sources, sources)
    rows = rl_rows(sources, chat=chat)
    longest = 0 if plan.rl.max_completion_tokens else _longest_prompt(tok, rows, chat)
    cuda, bf16_ok = device_info()
    args, notes = grpo_args(plan, world_size=world_size(), cuda=cuda, bf16_ok=bf16_ok, prompt_tokens=longest)
    _write_trainer_args(ctx, "GRPOTrainer", args, notes)

    recorder = RewardRecorder(ctx)
    funcs: list[RewardFunc] = []
    weights = []
    multi = len(sources) > 1
    rollouts = _episode_rollouts(plan, ctx, sources, tok)
    for src in sources:
        pairs: list[tuple[Any, float]] = list(zip(src.env.reward_funcs, src.env.reward_weights or [], strict=True))
        if isinstance(src.env, EpisodeEnvironment):
            pairs = [(episode_reward, 1.0)]  # verifiers' own score of each episode
        for func, weight in pairs:
            name = getattr(func, "__name__", "reward")
            name = f"{src.name}/{name}" if multi else name
            funcs.append(recorder.wrap(src.env, func, weight, name=name, source=src.name if multi else None))
            weights.append(weight)
    args["reward_weights"] = weights
    config = GRPOConfig(output_dir=str(ctx.run_dir.root / "trainer"), **args)
    if ctx.evaluator is None:
        _setup_eval(plan, ctx, tok, chat, default_tokens=args["max_completion_length"])
    trainer = GRPOTrainer(
        rollout_func=rollouts,
        model=model,
        reward_funcs=funcs,
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[RunDirCallback(ctx, recorder), *extra_callbacks],
    )
    _apply_optimizer(trainer, plan)
    return trainer


def _episode_sources(sources: list[Source]) -> dict[str, EpisodeEnvironment]:
    """The sources that run as verifiers episodes; refused when mixed with one-turn ones."""
    episodic = {s.name: s.env for s in sources if isinstance(s.env, EpisodeEnvironment)}
    if episodic and len(episodic) != len(sources):
        one_turn = ", ".join(s.name for s in sources if s.name not in episodic)
        raise PlanError(
            f"sources {', '.join(episodic)} run as verifiers episodes and {one_turn} as one-turn prompts; "
            "one run trains on one kind: give them separate runs (or continue one from the other with apply)"
        )
    return episodic


def _episode_rollouts(plan: Plan, ctx: EngineContext, sources: list[Source], tok: Any) -> EpisodeRollouts | None:
    """TRL's rollout function when the sources are verifiers episode environments (None when
    none is). Episode and one-turn sources cannot share a run: TRL takes one rollout path."""
    episodic = _episode_sources(sources)
    if not episodic:
        return None
    ctx.chat_trained = True  # every turn was rendered by the chat template
    folder = Path(tempfile.mkdtemp(prefix="primenb-tokenizer-"))
    tok.save_pretrained(str(folder))  # verifiers' training client renders every turn with it
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is TRL's documented hook
    rollouts = EpisodeRollouts(
        episodic,
        tok,
        folder,
        temperature=plan.rl.temperature,
        max_turn_tokens=plan.rl.max_completion_tokens or DEFAULT_TURN_TOKENS,
        seq_len=plan.seq_len,
        private=denies(plan),
        # one process cancels a step's episodes on a stop; ranks must agree, so they stop between steps
        should_stop=ctx.stop.poll if world_size() == 1 else None,
    )
    ctx.closers.append(rollouts.close)
    ctx.closers.append(lambda: shutil.rmtree(folder, ignore_errors=True))
    return rollouts


def run_sft_warmup(plan: Plan, ctx: EngineContext) -> Loaded:
    """RL with ``primenb.sft_warmup_steps``: SFT the (full) model on the train sources' ideal
    answers, save it as ``checkpoints/sft_warmup`` and return it as the base for GRPO."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    ctx.enter_phase(BUILDING_MODEL)
    model, tok, base = load_model(plan.model_name, seed=plan.seed, init_from=plan.init_from)
    if hasattr(model, "peft_config"):
        model = model.merge_and_unload()
    ctx.enter_phase(BUILDING_TRAINER)
    ctx.tokenizer, ctx.base = tok, base  # the warm-up checkpoint's note names the weights it started from
    chat = trains_on_chat(tok)
    wplan = warmup_plan(plan, tiny=is_tiny(plan.model_name))
    sources = build_sources(plan.sources)
    if ctx.trace is not None:
        ctx.trace.record_data("sft_warmup", plan.sources, sources)
    episodic = _episode_sources(sources)
    ctx.chat_trained = ctx.chat_trained or bool(episodic)
    rows = [r for src in sources for r in ideal_rows(src.env, src.name, chat=chat)]
    cuda, bf16_ok = device_info()
    args, notes = sft_args(
        wplan,
        world_size=world_size(),
        cuda=cuda,
        bf16_ok=bf16_ok,
        conversational=bool(episodic),  # ideal episodes: whole conversations, loss on the replies
        has_generation_markers="generation" in str(tok.chat_template),
    )
    _write_trainer_args(ctx, "SFTTrainer (sft_warmup)", args, notes, file="trainer_args.sft_warmup")
    _setup_eval(plan, ctx, tok, chat, default_tokens=plan.rl.max_completion_tokens or DEFAULT_ANSWER_TOKENS)
    log.info("SFT warm-up: %d steps on %d ideal answers before GRPO", wplan.max_steps, len(rows))
    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(output_dir=str(ctx.run_dir.root / "trainer"), **args),
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        callbacks=[WarmupCallback(ctx)],
    )
    trainer.train()
    model = trainer.accelerator.unwrap_model(trainer.model)
    path = ctx.run_dir.checkpoints / WARMUP_CHECKPOINT
    ctx.enter_phase(SAVING)
    ctx.save_checkpoint(model, int(trainer.state.global_step), name=WARMUP_CHECKPOINT)
    ctx.status.update(warmup_checkpoint=str(path), warmup_step=int(trainer.state.global_step))
    del trainer
    gc.collect()
    return model, tok, {**base, "path": str(path)}


def build_sft(plan: Plan, ctx: EngineContext, extra_callbacks: list[TrainerCallback]) -> Any:
    from trl import SFTConfig, SFTTrainer

    model, tok, base, peft_config = _prepare_model(plan, ctx)
    ctx.tokenizer, ctx.base = tok, base
    chat = trains_on_chat(tok)
    dataset, data_env = sft_dataset(plan, chat=chat)
    if ctx.trace is not None:
        ctx.trace.record_model(model, peft_config, base)
        ctx.trace.record_sft_data(str(plan.data["name"]), dataset, data_env, sft_env_args(plan))
    conversational = "messages" in getattr(dataset, "column_names", [])
    markers = bool(chat and "generation" in str(tok.chat_template))
    cuda, bf16_ok = device_info()
    args, notes = sft_args(
        plan,
        world_size=world_size(),
        cuda=cuda,
        bf16_ok=bf16_ok,
        conversational=conversational,
        has_generation_markers=markers,
    )
    _write_trainer_args(ctx, "SFTTrainer", args, notes)
    config = SFTConfig(output_dir=str(ctx.run_dir.root / "trainer"), **args)
    _setup_eval(plan, ctx, tok, chat, default_tokens=DEFAULT_ANSWER_TOKENS)
    sample_sources = ctx.evaluator.sources if ctx.evaluator else []
    if not sample_sources and data_env is not None:
        sample_sources = [Source(str(plan.data["name"]), data_env)]
    if sample_sources:
        ctx.sample_evaluator = Evaluator(
            sample_sources[:1],
            tok,
            chat=chat,
            num_examples=SFT_SAMPLE_PROMPTS,
            max_new_tokens=_eval_tokens(plan, DEFAULT_ANSWER_TOKENS),
        )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[RunDirCallback(ctx), *extra_callbacks],
    )
    _check_sft_rows(len(dataset), trainer.train_dataset, plan.data["seq_len"])
    _apply_optimizer(trainer, plan)
    return trainer


def _check_sft_rows(before: int, prepared: Any, seq_len: int) -> None:
    """TRL drops rows whose completion is cut off entirely by ``max_length``: say so plainly."""
    try:
        after = len(prepared)
    except TypeError:  # an iterable dataset: nothing to count
        return
    if after == 0:
        raise PlanError(
            f"no SFT example fits: data.seq_len = {seq_len} tokens leaves no room for any "
            f"completion after its prompt (all {before} rows were dropped); raise data.seq_len"
        )
    if after < before:
        log.warning(
            "%d of %d SFT rows were dropped: their completion does not fit in data.seq_len = %d tokens",
            before - after,
            before,
            seq_len,
        )


def _setup_eval(plan: Plan, ctx: EngineContext, tok: Any, chat: bool, *, default_tokens: int) -> None:
    if plan.eval is None:
        return
    sources = build_sources(plan.eval.sources)
    episodic = [s.name for s in sources if isinstance(s.env, EpisodeEnvironment)]
    if episodic:
        note = (
            f"eval source(s) {', '.join(episodic)} are verifiers episode environments: they are not evaluated "
            "during training yet; play held-out tasks against the served run with "
            "primenb.envs.vf_episodes.run_episodes (notebook 07)"
        )
        notes = ctx.status.data.get("notes", [])
        if note not in notes:  # the warm-up and GRPO both set up eval
            log.warning("%s", note)
            ctx.status.update(notes=[*notes, note])
        sources = [s for s in sources if s.name not in episodic]
        if not sources:
            return
    ctx.evaluator = Evaluator(
        sources,
        tok,
        chat=chat,
        num_examples=plan.eval.num_examples,
        max_new_tokens=_eval_tokens(plan, default_tokens),
    )
    if ctx.trace is not None:
        specs = [spec for spec in plan.eval.sources if spec.name not in episodic]
        ctx.trace.record_data("eval", specs, ctx.evaluator.sources, limit=plan.eval.num_examples)


def _ranks_in_sync(model: Any, device: Any) -> bool:
    """Whether every rank ended with the same weights (a parameter checksum, min vs max)."""
    with torch.no_grad():
        total = sum(float(p.detach().double().sum()) for p in model.parameters())
    lo = torch.tensor([total], dtype=torch.float64, device=device)
    hi = lo.clone()
    torch.distributed.all_reduce(lo, op=torch.distributed.ReduceOp.MIN)
    torch.distributed.all_reduce(hi, op=torch.distributed.ReduceOp.MAX)
    return bool(abs(hi.item() - lo.item()) <= 1e-6 * max(1.0, abs(hi.item())))


def run_training(plan: Plan, ctx: EngineContext) -> TrainResult:
    """Build the trainer for ``plan.mode``, train, and save the final checkpoint."""
    from accelerate import PartialState

    state = PartialState()
    ctx.device = state.device
    loaded = None
    if plan.mode == "rl" and plan.sft_warmup_steps:
        loaded = run_sft_warmup(plan, ctx)
    if ctx.stop.poll():
        log.warning("stop requested before %straining started", "GRPO " if loaded else "")
        ctx.stop.triggered = True
        final = None
        if loaded is not None and ctx.is_main:
            final = str(ctx.save_checkpoint(loaded[0], ctx.abs_step(0)))
        state.wait_for_everyone()
        return TrainResult(ctx.abs_step(0), True, final, {}, {})
    trainer = build_grpo(plan, ctx, [], loaded=loaded) if plan.mode == "rl" else build_sft(plan, ctx, [])
    if ctx.stop.poll():
        log.warning("stop requested before training started")
        ctx.stop.triggered = True
        return TrainResult(ctx.abs_step(0), True, None, {}, {})
    cancelled = False
    try:
        trainer.train()
    except StepCancelled:  # a stop during a step's episodes: that step is not trained
        cancelled = ctx.stop.triggered = True
        if trainer.state.global_step or loaded is not None:  # what a stop at a step end runs last
            trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)
    finally:
        ctx.close_all()
    step = ctx.abs_step(trainer.state.global_step)
    if cancelled and not trainer.state.global_step and loaded is None:
        log.warning("stopped during the first step: nothing was trained, no checkpoint written")
        state.wait_for_everyone()
        return TrainResult(step, True, None, ctx.first_eval, ctx.last_eval)
    if state.num_processes > 1:
        ctx.status.update(ranks_in_sync=_ranks_in_sync(trainer.model, state.device))
    final = None
    ctx.enter_phase(SAVING)
    if ctx.is_main:
        model = trainer.accelerator.unwrap_model(trainer.model)
        path = ctx.save_checkpoint(model, step)
        final = str(path or ctx.run_dir.checkpoint_dir(step))
    state.wait_for_everyone()
    scratch = ctx.run_dir.root / "trainer"
    if ctx.is_main and scratch.is_dir() and not any(scratch.iterdir()):
        scratch.rmdir()
    return TrainResult(step, ctx.stop.triggered, final, ctx.first_eval, ctx.last_eval)


__all__ = ["TrainResult", "build_grpo", "build_sft", "device_info", "lora_config", "run_training"]
