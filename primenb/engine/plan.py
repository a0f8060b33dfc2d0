"""Resolved prime-rl config (a dict) -> a training plan and TRL arguments. Pure Python.

Everything here reads the dict defensively (``.get`` with defaults) so hand-written dicts work,
and nothing imports torch, so the mapping can be tested and shown without the training stack.
The mapping is documented in ``docs/engine.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from primenb.engine.models_info import DEFAULT_MODEL
from primenb.envs.errors import _Base
from primenb.protocol.fields import detect_mode

OPTIM_TYPES = ("adamw", "sgd", "muon", "sign_sgd")
SCHEDULER_TYPES = ("constant", "linear", "cosine")


class PlanError(_Base, ValueError):
    """The resolved config asks for something the local engine cannot do."""


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _get(cfg: dict[str, Any], path: str, default: Any = None) -> Any:
    node: Any = cfg
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return default if node is None else node


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise PlanError(f"{name} must be an integer, got {value!r}")
    return int(value)


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
    max_norm: float = 1.0
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
# reading the resolved dict


def plan_mode(cfg: dict[str, Any]) -> str:
    """The config's mode (`primenb.protocol.fields.detect_mode`), refusing a dict that is neither."""
    if not any(key in cfg for key in ("trainer", "orchestrator", "data")):
        raise PlanError("resolved config is neither RL (needs [trainer]/[orchestrator]) nor SFT (needs [data])")
    return detect_mode(cfg)


def _sources(raw: Any, where: str) -> list[SourceSpec]:
    if raw is None:
        return []
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list):
        raise PlanError(f"{where} must be a list of sources")
    out = []
    for i, src in enumerate(raw):
        src = _d(src)
        taskset = _d(_get(src, "env.taskset", {}))
        env_id = taskset.get("id") or _get(src, "env.id")
        if not env_id:
            raise PlanError(f'{where}[{i}] has no environment; set env = {{ taskset = {{ id = "<id>" }} }}')
        args = {k: v for k, v in taskset.items() if k != "id" and v is not None}
        out.append(SourceSpec(name=str(src.get("name") or env_id), env_id=str(env_id), env_args=args))
    return out


def _optim(raw: dict[str, Any]) -> OptimSpec:
    kind = str(raw.get("type") or "adamw").lower()
    if kind not in OPTIM_TYPES:
        raise PlanError(f"optimizer type {kind!r} is not supported; use one of {', '.join(OPTIM_TYPES)}")
    max_norm = raw.get("max_norm")
    return OptimSpec(
        type=kind,
        lr=float(raw.get("lr", 1e-6) if raw.get("lr") is not None else 1e-6),
        weight_decay=float(raw.get("weight_decay") or 0.0) if "weight_decay" in raw else 0.01,
        max_norm=float(max_norm) if max_norm is not None else 0.0,
        betas=(float(raw.get("betas1", 0.9) or 0.9), float(raw.get("betas2", 0.999) or 0.999)),
        momentum=float(raw.get("momentum", 0.9) if raw.get("momentum") is not None else 0.9),
        nesterov=bool(raw.get("nesterov", True)),
        mu=float(raw.get("mu", 0.95) or 0.95),
    )


def _scheduler(raw: dict[str, Any]) -> SchedulerSpec:
    kind = str(raw.get("type") or "constant").lower()
    if kind not in SCHEDULER_TYPES:
        raise PlanError(f"scheduler type {kind!r} is not supported; use one of {', '.join(SCHEDULER_TYPES)}")
    return SchedulerSpec(
        type=kind,
        warmup_steps=_int(raw.get("warmup_steps") or 0, "scheduler.warmup_steps"),
        decay_steps=_int(raw.get("decay_steps") or 0, "scheduler.decay_steps"),
        min_lr=float(raw.get("min_lr") or 0.0),
    )


def _lora(raw: Any) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        return None
    return {
        "r": _int(raw.get("rank", 16), "lora.rank"),
        "lora_alpha": float(raw.get("alpha", 32.0)),
        "lora_dropout": float(raw.get("dropout") or 0.0),
        "target_modules": list(raw.get("target_modules") or []),
        "modules_to_save": list(raw.get("modules_to_save") or []),
    }


def _ckpt(*candidates: Any) -> tuple[int | None, int | None]:
    for raw in candidates:
        if isinstance(raw, dict):
            interval = raw.get("interval")
            keep = raw.get("keep_last")
            return (
                _int(interval, "ckpt.interval") if interval else None,
                _int(keep, "ckpt.keep_last") if keep else None,
            )
    return None, None


def _primenb(cfg: dict[str, Any]) -> dict[str, Any]:
    raw = _d(cfg.get("primenb"))
    return {
        "seed": _int(raw.get("seed", 0) or 0, "primenb.seed"),
        "sample_every": max(1, _int(raw.get("sample_every", 10) or 10, "primenb.sample_every")),
        "logging_steps": max(1, _int(raw.get("logging_steps", 1) or 1, "primenb.logging_steps")),
        "init_from": raw.get("init_from") or None,
        "sft_warmup_steps": max(0, _int(raw.get("sft_warmup_steps", 0) or 0, "primenb.sft_warmup_steps")),
        "start_step": max(0, _int(raw.get("start_step", 0) or 0, "primenb.start_step")),
        "data_collection": str(_d(raw.get("privacy")).get("data_collection") or "allow"),
    }


def _eval(raw: Any, where: str, default_tokens: int | None) -> EvalSpec | None:
    if not isinstance(raw, dict):
        return None
    sources = _sources(raw.get("source"), f"{where}.source")
    if not sources:
        return None
    num = raw.get("num_examples")
    return EvalSpec(
        interval=max(1, _int(raw.get("interval") or 100, f"{where}.interval")),
        num_examples=-1 if num is None else _int(num, f"{where}.num_examples"),
        sources=sources,
        max_completion_tokens=_get(raw, "sampling.max_completion_tokens") or default_tokens,
    )


def build_plan(cfg: dict[str, Any]) -> Plan:
    """Read the resolved config dict into a `Plan`; raises `PlanError` for what cannot run."""
    mode = plan_mode(cfg)
    extra = _primenb(cfg)
    max_steps = cfg.get("max_steps")
    if mode == "rl":
        max_steps = max_steps or _get(cfg, "trainer.max_steps") or _get(cfg, "orchestrator.max_steps")
    if not max_steps:
        raise PlanError("max_steps is not set; the local engine needs a step budget")
    max_steps = _int(max_steps, "max_steps")
    if max_steps < 1:
        raise PlanError(f"max_steps must be >= 1, got {max_steps}")
    if max_steps <= extra["start_step"]:
        raise PlanError(
            f"max_steps ({max_steps}) must be greater than primenb.start_step ({extra['start_step']}): "
            "max_steps is the last step of the run, counted on from the checkpoint it starts from"
        )

    if mode == "rl":
        model_name = (
            _get(cfg, "model.name")
            or _get(cfg, "trainer.model.name")
            or _get(cfg, "orchestrator.model.name")
            or DEFAULT_MODEL
        )
        optim_raw = _d(_get(cfg, "trainer.optim", {}))
        sched_raw = _d(_get(cfg, "trainer.scheduler", {}))
        lora_raw = _get(cfg, "trainer.model.lora")
        ckpt = _ckpt(_get(cfg, "trainer.ckpt"), cfg.get("ckpt"))
    else:
        model_name = _get(cfg, "model.name") or DEFAULT_MODEL
        optim_raw = _d(cfg.get("optim"))
        sched_raw = _d(cfg.get("scheduler"))
        lora_raw = _get(cfg, "model.lora")
        ckpt = _ckpt(cfg.get("ckpt"))

    plan = Plan(
        mode=mode,
        model_name=str(model_name),
        max_steps=max_steps,
        optim=_optim(optim_raw),
        scheduler=_scheduler(sched_raw),
        seed=extra["seed"],
        init_from=extra["init_from"],
        lora=_lora(lora_raw),
        ckpt_interval=ckpt[0],
        keep_last=ckpt[1],
        logging_steps=extra["logging_steps"],
        sample_every=extra["sample_every"],
        run_name=_get(cfg, "run.name"),
        sft_warmup_steps=extra["sft_warmup_steps"] if mode == "rl" else 0,
        start_step=extra["start_step"],
        data_collection=extra["data_collection"],
    )
    _check_scheduler(plan)

    if mode == "rl":
        orch = _d(cfg.get("orchestrator"))
        plan.sources = _sources(_get(orch, "train.source"), "orchestrator.train.source")
        if not plan.sources:
            raise PlanError(
                "orchestrator.train.source is empty; add a [[orchestrator.train.source]] with "
                'env.taskset.id (e.g. "reverse-text")'
            )
        plan.batch_size = _int(orch.get("batch_size") or 128, "orchestrator.batch_size")
        plan.group_size = _int(orch.get("group_size") or 1, "orchestrator.group_size")
        if plan.group_size < 2:
            raise PlanError(
                f"orchestrator.group_size = {plan.group_size}: GRPO compares completions within a "
                "group, so the local engine needs group_size >= 2"
            )
        plan.temperature = float(_get(orch, "train.sampling.temperature", 1.0))
        plan.max_completion_tokens = _get(orch, "train.sampling.max_completion_tokens")
        plan.seq_len = _get(orch, "seq_len") or _get(cfg, "trainer.model.seq_len")
        plan.eval = _eval(orch.get("eval"), "orchestrator.eval", plan.max_completion_tokens)
    else:
        data = _d(cfg.get("data"))
        if data.get("type", "sft") != "sft":
            raise PlanError(f"data.type = {data.get('type')!r} is not supported locally; use 'sft'")
        mask = _d(data.get("loss_mask"))
        plan.data = {
            "name": data.get("name") or "reverse-text",
            "args": _d(data.get("args")),
            "batch_size": _int(data.get("batch_size") or 128, "data.batch_size"),
            "micro_batch_size": _int(data.get("micro_batch_size") or 1, "data.micro_batch_size"),
            "seq_len": _int(data.get("seq_len") or _get(cfg, "model.seq_len") or 128, "data.seq_len"),
            "seed": _int(data.get("seed") or 0, "data.seed"),
            "shuffle": bool(data.get("shuffle", True)),
            "loss_mask": {
                "system": bool(mask.get("system", False)),
                "user": bool(mask.get("user", False)),
                "assistant": bool(mask.get("assistant", True)),
                "tool": bool(mask.get("tool", False)),
            },
            "splits": data.get("splits") or None,
            "subsets": data.get("subsets") or None,
        }
        plan.seq_len = plan.data["seq_len"]
        plan.eval = _eval(cfg.get("eval"), "eval", None)
    return plan


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
        "max_grad_norm": optim.max_norm,
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
