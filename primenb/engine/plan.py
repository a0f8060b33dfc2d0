"""Validated prime-rl config -> a training plan and TRL arguments. Pure Python.

The plan is read from the typed config (`primenb.config.schema`), so every default lives in the
schema: no field of `Plan` has a default of its own, and the plan keeps no fallback values. A
resolved dict (``configs/resolved.json``) is validated into the schema first. `build_plan` reads
the config through a recording view (`primenb.engine.reads`): what it read is what the local
engine honours (`primenb.engine.honoured`), and an error that is not a `PlanError` is reported at
the setting it came from. Nothing here imports torch, so the mapping can be tested and shown
without the training stack. The mapping is documented in ``docs/engine.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic_core import PydanticUndefined

from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema.common import CkptConfig, LoraConfig, Optimizer, PrimenbSettings
from primenb.config.schema.orchestrator import EvalConfig, EvalSourceConfig, TrainSourceConfig
from primenb.config.schema_walk import union_tags
from primenb.engine.models_info import DEFAULT_MODEL
from primenb.engine.reads import Reads, peek, view
from primenb.errors import PrimenbError
from primenb.protocol.fields import detect_mode

OPTIM_TYPES = union_tags(Optimizer)  # what the schema accepts; a plan built by hand is checked too
TypedConfig = RLConfig | SFTConfig


class PlanError(PrimenbError, ValueError):
    """The resolved config asks for something the local engine cannot do. ``path``: the setting
    at fault (dotted, ``[]`` for a list item), when one is known."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class SourceSpec:
    """One ``[[...source]]`` entry: an environment id, its arguments, and a display name."""

    name: str
    env_id: str
    env_args: dict[str, Any]
    agent: dict[str, Any] | None = None  # env.agent (harness, runtime, max_turns): episode environments


@dataclass
class OptimSpec:
    """The optimizer. A setting its type does not have is None (``betas`` of sgd, ...)."""

    type: str
    lr: float
    weight_decay: float
    max_norm: float | None  # None: no gradient clipping (upstream's meaning)
    betas: tuple[float, float] | None  # adamw, muon
    momentum: float | None  # sgd
    nesterov: bool | None  # sgd
    mu: float | None  # muon


@dataclass
class SchedulerSpec:
    type: str
    warmup_steps: int
    decay_steps: int
    min_lr: float


@dataclass
class EvalSpec:
    interval: int
    num_examples: int  # -1 = all
    sources: list[SourceSpec]
    max_completion_tokens: int | None


@dataclass
class RolloutSpec:
    """What an RL step samples: ``batch_size`` rollouts in groups of ``group_size``."""

    batch_size: int
    group_size: int
    temperature: float
    max_completion_tokens: int | None  # None: seq_len - the longest prompt
    reward_error_limit: float  # the share of failed reward calls that fails the run


@dataclass
class Plan:
    mode: str  # "rl" | "sft"
    model_name: str
    max_steps: int
    optim: OptimSpec
    scheduler: SchedulerSpec
    seed: int
    init_from: str | None
    lora: dict[str, Any] | None
    ckpt_interval: int | None
    keep_last: int | None
    logging_steps: int
    sample_every: int
    eval: EvalSpec | None
    run_name: str | None
    sft_warmup_steps: int  # rl: SFT steps on the environments' ideal answers before GRPO (sft: 0)
    start_step: int  # a continuation: init_from's step; steps start_step+1..max_steps train
    data_collection: str  # "deny": no prompt/completion text is written anywhere
    report_to: list[str]  # trackers ([primenb] report_to + [monitors.wandb])
    wandb: dict[str, Any] | None  # [monitors.wandb], as written
    seq_len: int  # the longest sequence trained on (rl: the tighter of orchestrator's and the model's)
    sources: list[SourceSpec]  # rl: the train environments (sft: none)
    rollouts: RolloutSpec | None  # rl only
    data: dict[str, Any]  # sft: the [data] table as the engine reads it (rl: empty)
    notes: list[str]  # what the plan adjusted, said once at the start of the run

    @property
    def rl(self) -> RolloutSpec:
        """The rollouts of an RL plan; an SFT plan has none."""
        if self.rollouts is None:
            raise PlanError(f"a {self.mode} plan has no rollouts")
        return self.rollouts


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
    for src in raw:  # every source read before one is refused (what was read is what is honoured)
        taskset = src.env.taskset
        env_id = (taskset.id if taskset else None) or (src.env.model_extra or {}).get("id")
        args = {k: v for k, v in (taskset.model_extra or {}).items() if v is not None} if taskset else {}
        agent = (src.env.model_extra or {}).get("agent")
        out.append(
            SourceSpec(
                name=str(src.name or env_id or ""),
                env_id=str(env_id or ""),
                env_args=args,
                agent=agent if isinstance(agent, dict) else None,
            )
        )
    for i, spec in enumerate(out):
        if not spec.env_id:
            raise PlanError(f'{where}[{i}] has no environment; set env = {{ taskset = {{ id = "<id>" }} }}')
    return out


def _optim(raw: Any) -> OptimSpec:
    kind = str(raw.type)
    if kind not in OPTIM_TYPES:
        raise PlanError(f"optimizer type {kind!r} is not supported; use one of {', '.join(OPTIM_TYPES)}")
    return OptimSpec(
        type=kind,
        lr=float(raw.lr),
        weight_decay=float(raw.weight_decay),
        max_norm=None if raw.max_norm is None else float(raw.max_norm),
        betas=(float(raw.betas1), float(raw.betas2)) if kind in ("adamw", "muon") else None,
        momentum=float(raw.momentum) if kind == "sgd" else None,
        nesterov=bool(raw.nesterov) if kind == "sgd" else None,
        mu=float(raw.mu) if kind == "muon" else None,
    )


def _scheduler(raw: Any) -> SchedulerSpec:
    # a constant schedule has no warmup or decay, a cosine one no decay_steps: 0 is what it does
    return SchedulerSpec(
        type=str(raw.type),
        warmup_steps=int(raw.warmup_steps) if raw.type != "constant" else 0,
        decay_steps=int(raw.decay_steps) if raw.type == "linear" else 0,
        min_lr=float(raw.min_lr) if raw.type != "constant" else 0.0,
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


def build_plan(cfg: dict[str, Any] | TypedConfig, reads: Reads | None = None) -> Plan:
    """Read a validated config (or a resolved dict, validated first) into a `Plan`; raises
    `PlanError` for what the local engine cannot run. ``reads`` collects the settings read (their
    pattern paths), also when the plan is refused."""
    model = typed_config(cfg)
    reads = Reads() if reads is None else reads
    m = view(model, "", reads)  # reads like the model, and records what it reads
    try:
        return _rl_plan(m) if isinstance(model, RLConfig) else _sft_plan(m)
    except PlanError:
        raise
    except Exception as exc:  # a value the schema lets through that the plan cannot use (`max_norm = "None"` was one)
        raise _located(reads, exc) from exc


def _located(reads: Reads, exc: Exception) -> PlanError:
    """A config error at the last setting read: the conversion that failed was reading it."""
    why = f"{type(exc).__name__}: {exc}"
    if reads.last is None:
        return PlanError(f"the local engine cannot read this config ({why}); validate it with `primenb validate`")
    path, value, default = reads.last
    given = "" if default is PydanticUndefined else f" ({default!r})"
    return PlanError(
        f"{path} = {value!r}: the local engine cannot use this value ({why}); remove the key to use the "
        f"schema's default{given} or set a value of the type docs/config.md gives",
        path=path,
    )


def _shared(
    m: Any, max_steps: int | None, model: Any, optim: Any, sched: Any, ckpt: CkptConfig | None
) -> dict[str, Any]:
    """The `Plan` fields RL and SFT read alike (``m``: the config; the rest: its tables that RL
    keeps under [trainer]). Refused only after all of them are read: the settings of a config the
    plan refuses are still judged used or not by what the plan reads."""
    extra = m.primenb or PrimenbSettings()
    wandb = _wandb_table(m)
    shared = {
        "model_name": str(model.name),
        "max_steps": int(max_steps or 0),
        "optim": _optim(optim),
        "scheduler": _scheduler(sched),
        "seed": extra.seed,
        "init_from": extra.init_from or None,
        "lora": _lora(model.lora),
        "ckpt_interval": ckpt.interval if ckpt else None,
        "keep_last": ckpt.keep_last if ckpt else None,
        "logging_steps": extra.logging_steps,
        "sample_every": extra.sample_every,
        "run_name": m.run.name,
        "start_step": extra.start_step,
        "data_collection": extra.privacy.data_collection,
        "report_to": _report_to(extra.report_to, wandb),
        "wandb": wandb,
    }
    return shared


def _check_shared(shared: dict[str, Any]) -> None:
    max_steps, start_step = shared["max_steps"], shared["start_step"]
    if not max_steps:
        raise PlanError("max_steps is not set; the local engine needs a step budget")
    if max_steps <= start_step:
        raise PlanError(
            f"max_steps ({max_steps}) must be greater than primenb.start_step ({start_step}): "
            "max_steps is the last step of the run, counted on from the checkpoint it starts from"
        )
    _check_scheduler(shared["scheduler"], max_steps)


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


def _rl_plan(m: RLConfig) -> Plan:
    t, o = m.trainer, m.orchestrator
    # the trainer and the orchestrator each stop at their own max_steps: the run at the first
    max_steps = _smallest(m.max_steps, t.max_steps, o.max_steps)
    shared = _shared(m, max_steps, t.model, t.optim, t.scheduler, t.ckpt)
    # rollouts are at most orchestrator.seq_len long, the trainer takes trainer.model.seq_len
    seq_len = min(int(o.seq_len), int(t.model.seq_len))
    extra = m.primenb or PrimenbSettings()
    group_size, batch_size, token_batch_size = int(o.group_size), o.batch_size, o.token_batch_size
    sampling = o.train.sampling
    temperature, max_tokens = float(sampling.temperature), sampling.max_completion_tokens
    reward_error_limit, warmup_steps = float(extra.reward_error_limit), extra.sft_warmup_steps
    sources = _sources(o.train.source, "orchestrator.train.source")
    evaluation = _eval(o.eval, "orchestrator.eval", max_tokens)
    # every setting is read: now what the local engine refuses, in the order a user fixes it
    _check_shared(shared)
    if not sources:
        raise PlanError(
            "orchestrator.train.source is empty; add a [[orchestrator.train.source]] with "
            'env.taskset.id (e.g. "reverse-text")'
        )
    notes: list[str] = []
    rollouts = RolloutSpec(
        batch_size=_batch_size(group_size, batch_size, token_batch_size, seq_len, notes),
        group_size=group_size,
        temperature=temperature,
        max_completion_tokens=max_tokens,
        reward_error_limit=reward_error_limit,
    )
    return Plan(
        mode="rl",
        **shared,
        eval=evaluation,
        sft_warmup_steps=warmup_steps,
        seq_len=seq_len,
        sources=sources,
        rollouts=rollouts,
        data={},
        notes=notes,
    )


def _batch_size(
    group_size: int, batch_size: int | None, token_batch_size: int | None, seq_len: int, notes: list[str]
) -> int:
    """Rollouts per step: ``orchestrator.batch_size``, or a token budget in whole groups."""
    if group_size < 2:
        raise PlanError(
            f"orchestrator.group_size = {group_size}: GRPO compares completions within a "
            "group, so the local engine needs group_size >= 2",
            path="orchestrator.group_size",
        )
    if batch_size is not None:
        return int(batch_size)
    if token_batch_size is None:  # the loader fills batch_size when neither is set; a hand-made dict may not
        raise PlanError("orchestrator.batch_size (or token_batch_size) is not set", path="orchestrator.batch_size")
    rollouts = token_batch_rollouts(token_batch_size, seq_len, group_size)
    notes.append(
        f"orchestrator.token_batch_size = {token_batch_size}: the local engine counts a step in "
        f"rollouts; using {rollouts} rollouts per step (token_batch_size / seq_len, whole groups)"
    )
    return rollouts


def token_batch_rollouts(token_batch_size: int, seq_len: int, group_size: int) -> int:
    """Rollouts per step for a token budget: each rollout holds at most ``seq_len`` tokens, so a
    budget of ``token_batch_size`` tokens needs at least this many, rounded up to whole groups."""
    groups = max(1, math.ceil(math.ceil(token_batch_size / seq_len) / group_size))
    return groups * group_size


def _sft_plan(m: SFTConfig) -> Plan:
    shared = _shared(m, m.max_steps, m.model, m.optim, m.scheduler, m.ckpt)
    evaluation = _eval(m.eval, "eval", None)
    data = m.data
    seq_len = min(int(data.seq_len), int(m.model.seq_len))  # the tighter of the data's and the model's
    table, notes = None, []  # a fake data table has none of the keys the engine reads
    if data.type == "sft":
        table, notes = _data_table(data, seq_len), _unused_loss_mask(data.loss_mask)
    # every setting is read: now what the local engine refuses, in the order a user fixes it
    _check_shared(shared)
    if table is None:
        raise PlanError(f"data.type = {data.type!r} is not supported locally; use 'sft'", path="data.type")
    return Plan(
        mode="sft",
        **shared,
        eval=evaluation,
        sft_warmup_steps=0,
        seq_len=seq_len,
        sources=[],
        rollouts=None,
        data=table,
        notes=notes,
    )


def _data_table(data: Any, seq_len: int) -> dict[str, Any]:
    """``[data]`` as the engine reads it (an ``sft`` table)."""
    mask = data.loss_mask
    return {
        "name": data.name,
        "args": {},
        "batch_size": int(data.batch_size),
        "micro_batch_size": int(data.micro_batch_size),
        "seq_len": seq_len,
        "seed": int(data.seed),
        "shuffle": bool(data.shuffle),
        "loss_mask": {"system": mask.system, "user": mask.user},
        "splits": data.splits or None,
        "subsets": data.subsets or None,
    }


def _unused_loss_mask(mask: Any) -> list[str]:
    """Notes for the loss-mask roles the local engine does not honour (peeked, not read: they stay
    in the run's "not used locally" list too)."""
    notes = []
    if not peek(mask, "assistant"):
        notes.append("loss_mask.assistant = false is not supported locally; assistant tokens train")
    if peek(mask, "tool"):
        notes.append("loss_mask.tool is not used by the local engine")
    return notes


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
            momentum=None,
            nesterov=None,
            mu=None,
        ),
        scheduler=SchedulerSpec(type="constant", warmup_steps=min(50, n // 4), decay_steps=0, min_lr=0.0),
        seed=plan.seed,
        init_from=None,  # the phase trains the model the RL run loaded (run_sft_warmup loads it)
        lora=None,
        ckpt_interval=None,
        keep_last=None,
        logging_steps=plan.logging_steps,
        sample_every=max(plan.sample_every, n + 1),
        eval=None,
        run_name=plan.run_name,
        sft_warmup_steps=0,
        start_step=0,
        data_collection=plan.data_collection,
        report_to=[],
        wandb=None,
        seq_len=plan.seq_len,
        sources=[],
        rollouts=None,
        data={
            "name": None,
            "args": {},
            "batch_size": WARMUP_BATCH,
            "micro_batch_size": WARMUP_BATCH,
            "seq_len": plan.seq_len,
            "seed": plan.seed,
            "shuffle": True,
            "loss_mask": {"system": False, "user": False},
        },
        notes=[],
    )


def _check_scheduler(s: SchedulerSpec, max_steps: int) -> None:
    if s.type == "linear" and s.warmup_steps + s.decay_steps > max_steps:
        raise PlanError(
            f"scheduler: warmup_steps + decay_steps ({s.warmup_steps} + {s.decay_steps}) "
            f"exceeds max_steps ({max_steps})"
        )
    if s.type == "cosine" and s.warmup_steps >= max_steps:
        raise PlanError(f"scheduler: cosine needs warmup_steps ({s.warmup_steps}) < max_steps ({max_steps})")


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
        beta1, beta2 = need(optim.betas, "betas", optim)
        args.update(optim="adamw_torch", adam_beta1=beta1, adam_beta2=beta2)
    elif optim.type == "sgd":
        momentum = need(optim.momentum, "momentum", optim)
        nesterov = need(optim.nesterov, "nesterov", optim) and momentum > 0
        args.update(
            optim="sgd",
            optim_args=f"momentum={momentum},nesterov={str(nesterov).lower()}",
        )
    return args


T = TypeVar("T")


def need(value: T | None, what: str, optim: OptimSpec) -> T:
    """A setting of ``optim``'s type (a spec built by hand may lack it)."""
    if value is None:
        raise PlanError(f"optimizer {optim.type!r} needs {what}; the plan has none")
    return value


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
    rl = plan.rl
    per_device, batch_notes = grpo_batch(rl.batch_size, rl.group_size, world_size)
    notes = [*plan.notes, *batch_notes]  # what the plan adjusted, then what the batch did
    max_tokens = rl.max_completion_tokens
    if not max_tokens:
        max_tokens = max(1, plan.seq_len - prompt_tokens)
        notes.append(f"max_completion_tokens not set: using seq_len - longest prompt = {max_tokens} tokens")
    args = common_args(plan, cuda=cuda, bf16_ok=bf16_ok)
    args.update(
        per_device_train_batch_size=per_device,
        gradient_accumulation_steps=1,
        num_generations=rl.group_size,
        max_completion_length=int(max_tokens),
        temperature=rl.temperature,
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
    per_device, accum, batch_notes = sft_batch(data["batch_size"], data["micro_batch_size"], world_size)
    notes = [*plan.notes, *batch_notes]
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
