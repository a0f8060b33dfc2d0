"""Validated prime-rl config -> a training plan and TRL arguments. Pure Python.

The plan is read from the typed config (`primenb.config.schema`), so every default lives in the
schema; a resolved dict (``configs/resolved.json``) is validated into it first. Which settings
the plan honours, and which a run reports as "not used locally", is `primenb.engine.honoured`.
Nothing here imports torch, so the mapping can be tested and shown without the training stack.
The mapping is documented in ``docs/engine.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema.common import CkptConfig, LoraConfig, PrimenbSettings
from primenb.config.schema.orchestrator import EvalConfig, EvalSourceConfig, TrainSourceConfig
from primenb.engine.models_info import DEFAULT_MODEL
from primenb.envs.errors import _Base
from primenb.protocol.fields import detect_mode

OPTIM_TYPES = ("adamw", "sgd", "muon", "sign_sgd")
SCHEDULER_TYPES = ("constant", "linear", "cosine")
TypedConfig = RLConfig | SFTConfig


class PlanError(_Base, ValueError):
    """The resolved config asks for something the local engine cannot do."""


@dataclass
class SourceSpec:
    """One ``[[...source]]`` entry: an environment id, its arguments, and a display name."""

    name: str
    env_id: str
    env_args: dict[str, Any] = field(default_factory=dict)


@dataclass
class OptimSpec:
    type: str = "adamw"
    lr: float = 1e-6
    weight_decay: float = 0.01
    max_norm: float | None = 1.0  # None: no gradient clipping (upstream's meaning)
    betas: tuple[float, float] = (0.9, 0.999)
    momentum: float = 0.9
    nesterov: bool = True
    mu: float = 0.95


@dataclass
class SchedulerSpec:
    type: str = "constant"
    warmup_steps: int = 0
    decay_steps: int = 0
    min_lr: float = 0.0


@dataclass
class EvalSpec:
    interval: int
    num_examples: int  # -1 = all
    sources: list[SourceSpec]
    max_completion_tokens: int | None = None


@dataclass
class Plan:
    mode: str  # "rl" | "sft"
    model_name: str
    max_steps: int
    optim: OptimSpec
    scheduler: SchedulerSpec
    seed: int = 0
    init_from: str | None = None
    lora: dict[str, Any] | None = None
    ckpt_interval: int | None = None
    keep_last: int | None = None
    logging_steps: int = 1
    sample_every: int = 10
    eval: EvalSpec | None = None
    run_name: str | None = None
    sft_warmup_steps: int = 0  # rl: SFT steps on the environments' ideal answers before GRPO
    start_step: int = 0  # a continuation: init_from's step; steps start_step+1..max_steps train
    data_collection: str = "allow"  # "deny": no prompt/completion text is written anywhere
    report_to: list[str] = field(default_factory=list)  # trackers ([primenb] report_to + [monitors.wandb])
    wandb: dict[str, Any] | None = None  # [monitors.wandb], as written
    # rl: the share of failed reward calls that fails the run (a hand-made plan: the schema's default)
    reward_error_limit: float = PrimenbSettings.model_fields["reward_error_limit"].default
    # rl
    sources: list[SourceSpec] = field(default_factory=list)
    batch_size: int = 8
    group_size: int = 8
    temperature: float = 1.0
    max_completion_tokens: int | None = None
    seq_len: int | None = None
    # sft
    data: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# reading the validated config


def plan_mode(cfg: dict[str, Any]) -> str:
    """The config's mode (`primenb.protocol.fields.detect_mode`), refusing a dict that is neither."""
    if not any(key in cfg for key in ("trainer", "orchestrator", "data")):
        raise PlanError("resolved config is neither RL (needs [trainer]/[orchestrator]) nor SFT (needs [data])")
    return detect_mode(cfg)


def typed_config(cfg: dict[str, Any] | TypedConfig) -> TypedConfig:
    """The validated config of a resolved dict: shared fields propagated as the loader does, then
    the schema's own validation (a resolved.json written by primenb always passes)."""
    if isinstance(cfg, (RLConfig, SFTConfig)):
        return cfg
    if not isinstance(cfg, dict):
        raise PlanError(f"resolved config must be a table, got {type(cfg).__name__}")
    from pydantic import ValidationError

    from primenb.config.propagate import propagate_rl, propagate_sft

    mode = plan_mode(cfg)
    root: type[TypedConfig] = SFTConfig if mode == "sft" else RLConfig
    if mode == "rl":  # a dump writes unset shared values as none: propagation would copy them down
        cfg = {k: v for k, v in cfg.items() if v is not None}  # (every optional top-level RL table defaults to none)
    prop = propagate_sft(cfg) if mode == "sft" else propagate_rl(cfg)
    if prop.conflicts:  # the loader refuses these; a hand-made dict gets the same answer
        c = prop.conflicts[0]
        raise PlanError(
            f"{'.'.join(map(str, c.path))} = {c.value!r} disagrees with {'.'.join(map(str, c.shared))} = "
            f"{c.shared_value!r}; set one"
        )
    data = prop.data
    try:
        return root.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors(include_url=False)[:5])
        raise PlanError(f"the resolved config is not a valid {mode.upper()} config: {problems}") from None


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error["loc"])
    if error["type"] == "union_tag_invalid":  # `type = "lamb"`: say which types there are
        ctx = error.get("ctx") or {}
        return f"{where}.type = {ctx.get('tag')!r} is not supported; use one of {ctx.get('expected_tags')}"
    return f"{where}: {error['msg']}"


def _sources(raw: Sequence[TrainSourceConfig | EvalSourceConfig], where: str) -> list[SourceSpec]:
    out = []
    for i, src in enumerate(raw):
        taskset = src.env.taskset
        env_id = (taskset.id if taskset else None) or (src.env.model_extra or {}).get("id")
        if not env_id:
            raise PlanError(f'{where}[{i}] has no environment; set env = {{ taskset = {{ id = "<id>" }} }}')
        args = {k: v for k, v in (taskset.model_extra or {}).items() if v is not None} if taskset else {}
        out.append(SourceSpec(name=str(src.name or env_id), env_id=str(env_id), env_args=args))
    return out


def _optim(raw: Any) -> OptimSpec:
    kind = str(raw.type)
    if kind not in OPTIM_TYPES:  # the schema's union; kept for plans built by hand
        raise PlanError(f"optimizer type {kind!r} is not supported; use one of {', '.join(OPTIM_TYPES)}")
    max_norm = None if raw.max_norm is None else float(raw.max_norm)
    spec = OptimSpec(type=kind, lr=float(raw.lr), weight_decay=float(raw.weight_decay), max_norm=max_norm)
    if hasattr(raw, "betas1"):
        spec.betas = (float(raw.betas1), float(raw.betas2))
    if kind == "sgd":
        spec.momentum, spec.nesterov = float(raw.momentum), bool(raw.nesterov)
    if kind == "muon":
        spec.mu = float(raw.mu)
    return spec


def _scheduler(raw: Any) -> SchedulerSpec:
    return SchedulerSpec(
        type=str(raw.type),
        warmup_steps=int(getattr(raw, "warmup_steps", 0)),
        decay_steps=int(getattr(raw, "decay_steps", 0)),
        min_lr=float(getattr(raw, "min_lr", 0.0)),
    )


def _lora(raw: LoraConfig | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    return {
        "r": int(raw.rank),
        "lora_alpha": float(raw.alpha),
        "lora_dropout": float(raw.dropout),
        "target_modules": list(raw.target_modules),
        "modules_to_save": list(raw.modules_to_save),
    }


def _eval(raw: EvalConfig | None, where: str, default_tokens: int | None) -> EvalSpec | None:
    if raw is None:
        return None
    sources = _sources(raw.source, f"{where}.source")
    if not sources:
        return None
    return EvalSpec(
        interval=int(raw.interval),
        num_examples=int(raw.num_examples),
        sources=sources,
        max_completion_tokens=raw.sampling.max_completion_tokens or default_tokens,
    )


def _smallest(*values: int | None) -> int | None:
    """The tightest of several limits on one thing (unset ones left out)."""
    given = [v for v in values if v is not None]
    return min(given) if given else None


def build_plan(cfg: dict[str, Any] | TypedConfig) -> Plan:
    """Read a validated config (or a resolved dict, validated first) into a `Plan`; raises
    `PlanError` for what the local engine cannot run."""
    m = typed_config(cfg)
    extra = m.primenb or PrimenbSettings()
    ckpt: CkptConfig | None
    if isinstance(m, RLConfig):
        # the trainer and the orchestrator each stop at their own max_steps: the run at the first
        max_steps = _smallest(m.max_steps, m.trainer.max_steps, m.orchestrator.max_steps)
        model, optim, sched, ckpt = m.trainer.model, m.trainer.optim, m.trainer.scheduler, m.trainer.ckpt
        # rollouts are at most orchestrator.seq_len long, the trainer takes trainer.model.seq_len
        seq_len = _smallest(m.orchestrator.seq_len, model.seq_len)
    else:
        max_steps = m.max_steps
        model, optim, sched, ckpt = m.model, m.optim, m.scheduler, m.ckpt
        seq_len = None
    if not max_steps:
        raise PlanError("max_steps is not set; the local engine needs a step budget")
    if max_steps <= extra.start_step:
        raise PlanError(
            f"max_steps ({max_steps}) must be greater than primenb.start_step ({extra.start_step}): "
            "max_steps is the last step of the run, counted on from the checkpoint it starts from"
        )
    plan = Plan(
        mode="rl" if isinstance(m, RLConfig) else "sft",
        model_name=str(model.name),
        max_steps=int(max_steps),
        optim=_optim(optim),
        scheduler=_scheduler(sched),
        seed=extra.seed,
        init_from=extra.init_from or None,
        lora=_lora(model.lora),
        ckpt_interval=ckpt.interval if ckpt else None,
        keep_last=ckpt.keep_last if ckpt else None,
        logging_steps=extra.logging_steps,
        sample_every=extra.sample_every,
        run_name=m.run.name,
        sft_warmup_steps=extra.sft_warmup_steps if isinstance(m, RLConfig) else 0,
        start_step=extra.start_step,
        data_collection=extra.privacy.data_collection,
        report_to=_report_to(extra.report_to, _wandb_table(m)),
        wandb=_wandb_table(m),
        reward_error_limit=extra.reward_error_limit,
        seq_len=seq_len,
    )
    _check_scheduler(plan)
    if isinstance(m, RLConfig):
        _rl(plan, m)
    else:
        _sft(plan, m)
    return plan


def _wandb_table(m: Any) -> dict[str, Any] | None:
    """``[monitors.wandb]`` of the config (RL: the shared table, else the trainer's)."""
    for owner in (m, getattr(m, "trainer", None), getattr(m, "orchestrator", None)):
        table = getattr(getattr(owner, "monitors", None), "wandb", None)
        if table is not None:
            return dict(table.model_dump())
    return None


def _report_to(kinds: Sequence[str], wandb: dict[str, Any] | None) -> list[str]:
    out = list(dict.fromkeys(kinds))
    if wandb is not None and "wandb" not in out:
        out.append("wandb")
    return out


def _rl(plan: Plan, m: RLConfig) -> None:
    o = m.orchestrator
    plan.sources = _sources(o.train.source, "orchestrator.train.source")
    if not plan.sources:
        raise PlanError(
            "orchestrator.train.source is empty; add a [[orchestrator.train.source]] with "
            'env.taskset.id (e.g. "reverse-text")'
        )
    plan.group_size = int(o.group_size)
    if plan.group_size < 2:
        raise PlanError(
            f"orchestrator.group_size = {plan.group_size}: GRPO compares completions within a "
            "group, so the local engine needs group_size >= 2"
        )
    if o.batch_size is not None:
        plan.batch_size = int(o.batch_size)
    elif o.token_batch_size is not None:
        plan.batch_size = token_batch_rollouts(o.token_batch_size, plan.seq_len or o.seq_len, plan.group_size)
        plan.notes.append(
            f"orchestrator.token_batch_size = {o.token_batch_size}: the local engine counts a step in "
            f"rollouts; using {plan.batch_size} rollouts per step (token_batch_size / seq_len, whole groups)"
        )
    else:  # the loader fills batch_size when neither is set; a hand-made dict may not
        raise PlanError("orchestrator.batch_size (or token_batch_size) is not set")
    plan.temperature = float(o.train.sampling.temperature)
    plan.max_completion_tokens = o.train.sampling.max_completion_tokens
    plan.eval = _eval(o.eval, "orchestrator.eval", plan.max_completion_tokens)


def token_batch_rollouts(token_batch_size: int, seq_len: int, group_size: int) -> int:
    """Rollouts per step for a token budget: each rollout holds at most ``seq_len`` tokens, so a
    budget of ``token_batch_size`` tokens needs at least this many, rounded up to whole groups."""
    groups = max(1, math.ceil(math.ceil(token_batch_size / seq_len) / group_size))
    return groups * group_size


def _sft(plan: Plan, m: SFTConfig) -> None:
    data = m.data
    if data.type != "sft":
        raise PlanError(f"data.type = {data.type!r} is not supported locally; use 'sft'")
    mask = data.loss_mask
    seq_len = int(_smallest(data.seq_len, m.model.seq_len) or data.seq_len)
    plan.data = {
        "name": data.name,
        "args": {},
        "batch_size": int(data.batch_size),
        "micro_batch_size": int(data.micro_batch_size),
        "seq_len": seq_len,
        "seed": int(data.seed),
        "shuffle": bool(data.shuffle),
        "loss_mask": {"system": mask.system, "user": mask.user, "assistant": mask.assistant, "tool": mask.tool},
        "splits": data.splits or None,
        "subsets": data.subsets or None,
    }
    plan.seq_len = seq_len
    plan.eval = _eval(m.eval, "eval", None)


WARMUP_BATCH = 64
WARMUP_LR_TINY = 2e-3


def warmup_plan(plan: Plan, *, tiny: bool) -> Plan:
    """The SFT plan of an RL run's ``primenb.sft_warmup_steps`` phase.

    Trains on the train sources' ideal answers (prompt/completion, loss on the completion) with
    AdamW, batch 64, a constant LR after a short warmup: 2e-3 for the embedded tiny models
    (measured: 150 steps take reverse-text from 0 to ~0.5 exact match), else the RL learning
    rate. No eval, samples or checkpoints inside the phase.
    """
    n = plan.sft_warmup_steps
    return Plan(
        mode="sft",
        model_name=plan.model_name,
        max_steps=n,
        optim=OptimSpec(
            type="adamw",
            lr=WARMUP_LR_TINY if tiny else plan.optim.lr,
            weight_decay=0.0,
            max_norm=1.0,
            betas=(0.9, 0.999),
        ),
        scheduler=SchedulerSpec(type="constant", warmup_steps=min(50, n // 4)),
        seed=plan.seed,
        logging_steps=plan.logging_steps,
        sample_every=max(plan.sample_every, n + 1),
        run_name=plan.run_name,
        seq_len=plan.seq_len,
        data={
            "name": None,
            "args": {},
            "batch_size": WARMUP_BATCH,
            "micro_batch_size": WARMUP_BATCH,
            "seq_len": int(plan.seq_len or 512),
            "seed": plan.seed,
            "shuffle": True,
            "loss_mask": {"system": False, "user": False, "assistant": True, "tool": False},
        },
    )


def _check_scheduler(plan: Plan) -> None:
    s = plan.scheduler
    if s.type == "linear" and s.warmup_steps + s.decay_steps > plan.max_steps:
        raise PlanError(
            f"scheduler: warmup_steps + decay_steps ({s.warmup_steps} + {s.decay_steps}) "
            f"exceeds max_steps ({plan.max_steps})"
        )
    if s.type == "cosine" and s.warmup_steps >= plan.max_steps:
        raise PlanError(f"scheduler: cosine needs warmup_steps ({s.warmup_steps}) < max_steps ({plan.max_steps})")


# ---------------------------------------------------------------------------------------------
# plan -> TRL/transformers arguments


def grpo_batch(batch_size: int, group_size: int, world_size: int) -> tuple[int, list[str]]:
    """Per-device batch for GRPO so that one optimizer step sees ``batch_size`` rollouts.

    TRL needs ``per_device * world_size`` (its generation batch, with one gradient step per
    generation) to be divisible by ``num_generations`` = ``group_size``. When ``batch_size`` does
    not split evenly, the smallest per-device batch that satisfies the rule is used (more rollouts
    per step than asked) and a note says so.
    """
    notes: list[str] = []
    if batch_size < group_size:
        notes.append(
            f"batch_size {batch_size} < group_size {group_size}: using one group ({group_size} rollouts) per step"
        )
        batch_size = group_size
    per_device = math.ceil(batch_size / world_size)
    while (per_device * world_size) % group_size:
        per_device += 1
    if per_device * world_size != batch_size:
        notes.append(
            f"batch_size {batch_size} with group_size {group_size} on {world_size} process(es): "
            f"using {per_device} rollouts per process = {per_device * world_size} per step"
        )
    return per_device, notes


def sft_batch(batch_size: int, micro_batch_size: int, world_size: int) -> tuple[int, int, list[str]]:
    """(per-device batch, gradient accumulation steps, notes) for SFT."""
    notes: list[str] = []
    per_device = max(1, min(micro_batch_size, batch_size))
    accum = max(1, round(batch_size / (per_device * world_size)))
    if per_device * world_size * accum != batch_size:
        notes.append(
            f"batch_size {batch_size} = micro_batch_size {per_device} x {world_size} process(es) x "
            f"accumulation does not divide evenly; using {accum} accumulation step(s) = "
            f"{per_device * world_size * accum} samples per step"
        )
    return per_device, accum, notes


def optim_args(optim: OptimSpec) -> dict[str, Any]:
    """TrainingArguments fields for the optimizer; ``muon``/``sign_sgd`` are built by the engine
    (see `primenb.engine.optim`) and only get lr/weight decay/clipping here."""
    args: dict[str, Any] = {
        "learning_rate": optim.lr,
        "weight_decay": optim.weight_decay,
        "max_grad_norm": 0.0 if optim.max_norm is None else optim.max_norm,  # the Trainer clips only above 0
    }
    if optim.type == "adamw":
        args.update(optim="adamw_torch", adam_beta1=optim.betas[0], adam_beta2=optim.betas[1])
    elif optim.type == "sgd":
        nesterov = optim.nesterov and optim.momentum > 0
        args.update(
            optim="sgd",
            optim_args=f"momentum={optim.momentum},nesterov={str(nesterov).lower()}",
        )
    return args


def scheduler_args(s: SchedulerSpec, lr: float) -> dict[str, Any]:
    """``lr_scheduler_type`` / ``warmup_steps`` / ``lr_scheduler_kwargs`` for a prime-rl scheduler.

    constant -> ``constant`` (``constant_with_warmup`` if warmup is set); linear (warmup, hold,
    then linear decay to ``min_lr`` over the last ``decay_steps``) -> ``warmup_stable_decay``;
    cosine (warmup, then cosine to ``min_lr``) -> ``cosine_with_min_lr``.
    """
    if s.type == "constant" or (s.type == "linear" and s.decay_steps == 0):
        if s.warmup_steps:
            return {"lr_scheduler_type": "constant_with_warmup", "warmup_steps": s.warmup_steps}
        return {"lr_scheduler_type": "constant", "warmup_steps": 0}
    if s.type == "linear":
        return {
            "lr_scheduler_type": "warmup_stable_decay",
            "warmup_steps": s.warmup_steps,
            "lr_scheduler_kwargs": {
                "num_decay_steps": s.decay_steps,
                "decay_type": "linear",
                "min_lr_ratio": (s.min_lr / lr) if lr else 0.0,
            },
        }
    return {
        "lr_scheduler_type": "cosine_with_min_lr",
        "warmup_steps": s.warmup_steps,
        "lr_scheduler_kwargs": {"min_lr": s.min_lr},
    }


def common_args(plan: Plan, *, cuda: bool, bf16_ok: bool) -> dict[str, Any]:
    """Arguments shared by GRPOConfig and SFTConfig."""
    args: dict[str, Any] = {
        "max_steps": plan.max_steps - plan.start_step,  # the trainer counts from 0
        "seed": plan.seed,
        "data_seed": plan.seed,
        "logging_steps": plan.logging_steps,
        "logging_first_step": True,
        "save_strategy": "no",  # the engine writes checkpoints/step_N itself
        "eval_strategy": "no",  # the engine runs its own generation-based eval
        "report_to": "none",
        "disable_tqdm": True,
        "use_cpu": not cuda,
        "bf16": bool(cuda and bf16_ok),
        "activation_checkpointing": False,
        "dataloader_num_workers": 0,
        "ddp_find_unused_parameters": False,
        "remove_unused_columns": False,
        "run_name": plan.run_name,
    }
    args.update(optim_args(plan.optim))
    args.update(scheduler_args(plan.scheduler, plan.optim.lr))
    return args


def grpo_args(
    plan: Plan, *, world_size: int, cuda: bool, bf16_ok: bool, prompt_tokens: int = 0
) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig keyword arguments and notes about adjustments."""
    per_device, notes = grpo_batch(plan.batch_size, plan.group_size, world_size)
    max_tokens = plan.max_completion_tokens
    if not max_tokens:
        seq_len = plan.seq_len or 2048
        max_tokens = max(1, seq_len - prompt_tokens)
        notes.append(f"max_completion_tokens not set: using seq_len - longest prompt = {max_tokens} tokens")
    args = common_args(plan, cuda=cuda, bf16_ok=bf16_ok)
    args.update(
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=1,
        num_generations=plan.group_size,
        max_completion_length=int(max_tokens),
        temperature=plan.temperature,
        use_vllm=False,
        beta=0.0,
        log_completions=False,
        shuffle_dataset=True,
    )
    return args, notes


def sft_args(
    plan: Plan,
    *,
    world_size: int,
    cuda: bool,
    bf16_ok: bool,
    conversational: bool = False,
    has_generation_markers: bool = False,
) -> tuple[dict[str, Any], list[str]]:
    """SFTConfig keyword arguments and notes about adjustments."""
    data = plan.data
    per_device, accum, notes = sft_batch(data["batch_size"], data["micro_batch_size"], world_size)
    mask = data["loss_mask"]
    args = common_args(plan, cuda=cuda, bf16_ok=bf16_ok)
    args.update(
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=accum,
        max_length=data["seq_len"],
        data_seed=data["seed"],
        train_sampling_strategy="random" if data["shuffle"] else "sequential",
        include_num_input_tokens_seen="non_padding",
    )
    if not mask["assistant"]:
        notes.append("loss_mask.assistant = false is not supported locally; assistant tokens train")
    # prompt/completion rows: train on the completion only unless user/system tokens should train
    args["completion_only_loss"] = not (mask["user"] or mask["system"])
    if conversational and not (mask["user"] or mask["system"]):
        if has_generation_markers:
            args["assistant_only_loss"] = True
        else:
            notes.append(
                "chat template has no {% generation %} markers: conversational 'messages' rows "
                "train on all tokens (prompt/completion rows still train on the completion only)"
            )
    if mask["tool"]:
        notes.append("loss_mask.tool is not used by the local engine")
    return args, notes


__all__ = [
    "DEFAULT_MODEL",
    "EvalSpec",
    "OptimSpec",
    "Plan",
    "PlanError",
    "SchedulerSpec",
    "SourceSpec",
    "build_plan",
    "common_args",
    "grpo_args",
    "grpo_batch",
    "optim_args",
    "plan_mode",
    "scheduler_args",
    "sft_args",
    "sft_batch",
    "warmup_plan",
]
