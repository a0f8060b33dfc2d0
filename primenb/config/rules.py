"""Cross-field rules, checked on the propagated, schema-valid config (as upstream's validators)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from primenb.config.deploy_rules import rl_deploy_rules, rl_deployment, sft_deployment, sft_infra
from primenb.config.model_rules import clipping_notes, model_rules, router_replay_rule
from primenb.config.positions import Path
from primenb.config.problem import Check, Problem
from primenb.config.renderer_check import rl_renderer, sft_renderer
from primenb.config.schema import RLConfig, SFTConfig
from primenb.protocol.rundir import checkpoint_step


def rl_rules(c: RLConfig) -> Iterator[Problem]:
    for check in RL_CHECKS:
        yield from check(c)


def sft_rules(c: SFTConfig) -> Iterator[Problem]:
    for check in SFT_CHECKS:
        yield from check(c)


def _rl_sources(c: Any) -> Iterator[Problem]:
    yield from _source_rules(c.orchestrator.train.source, ("orchestrator", "train", "source"), required=True)


def _rl_eval(c: Any) -> Iterator[Problem]:
    if c.orchestrator.eval is not None:
        yield from _eval_rules(c.orchestrator.eval, ("orchestrator", "eval"))


def _rl_max_steps(c: Any) -> Iterator[Problem]:
    t, o = c.trainer, c.orchestrator
    if t.max_steps != o.max_steps:
        yield Problem(
            ("orchestrator", "max_steps"),
            f"trainer.max_steps ({t.max_steps}) and orchestrator.max_steps ({o.max_steps}) differ",
            "set max_steps once at the top level",
        )


def _rl_seq_len(c: Any) -> Iterator[Problem]:
    t, o = c.trainer, c.orchestrator
    if t.model.seq_len < o.seq_len:
        yield Problem(
            ("trainer", "model", "seq_len"),
            f"trainer.model.seq_len ({t.model.seq_len}) is smaller than orchestrator.seq_len ({o.seq_len})",
            "set seq_len once at the top level, or raise trainer.model.seq_len",
        )


def _rl_ckpt(c: Any) -> Iterator[Problem]:
    t, o = c.trainer, c.orchestrator
    if (t.ckpt is None) != (o.ckpt is None):
        yield Problem(
            ("trainer", "ckpt") if t.ckpt else ("orchestrator", "ckpt"),
            "checkpointing is configured for only one of trainer and orchestrator",
            "use the shared [ckpt] table, which configures both",
        )
    elif t.ckpt and o.ckpt and t.ckpt.interval != o.ckpt.interval:
        yield Problem(
            ("trainer", "ckpt", "interval"),
            f"trainer and orchestrator checkpoint intervals differ ({t.ckpt.interval} vs {o.ckpt.interval})",
            "set [ckpt] interval once at the top level",
        )


def _rl_wandb(c: Any) -> Iterator[Problem]:
    tw, ow = c.trainer.monitors.wandb, c.orchestrator.monitors.wandb
    if (tw is None) != (ow is None):
        yield Problem(
            ("monitors", "wandb"),
            "W&B is configured for only one of trainer and orchestrator",
            "use the shared [monitors.wandb] table",
        )
    elif tw and ow and tw.project != ow.project:
        yield Problem(
            ("trainer", "monitors", "wandb", "project"),
            "trainer and orchestrator log to different W&B projects",
            "set [monitors.wandb] project once",
        )
    if tw is not None and tw.offline:
        yield Problem(
            ("monitors", "wandb", "offline"),
            "offline W&B is not supported for RL runs",
            "remove `offline = true`, or drop [monitors.wandb]",
        )


def _rl_model_names(c: Any) -> Iterator[Problem]:
    t, o = c.trainer, c.orchestrator
    if c.inference is not None and c.inference.vllm.model != o.model.name:
        yield Problem(
            ("inference", "vllm", "model"),
            f"inference serves `{c.inference.vllm.model}` but the orchestrator samples `{o.model.name}`",
            "set [model] name once at the top level",
        )
    elif c.inference is None and t.model.name != o.model.name:
        yield Problem(
            ("orchestrator", "model", "name"),
            f"trainer trains `{t.model.name}` but the orchestrator samples `{o.model.name}`",
            "set [model] name once at the top level",
        )


def _rl_scheduler(c: Any) -> Iterator[Problem]:
    yield from _scheduler_rules(c.trainer.scheduler, c.trainer.max_steps, ("trainer", "scheduler"))


def _rl_model(c: Any) -> Iterator[Problem]:
    t = c.trainer
    yield from model_rules(t.model, t.optim, ("trainer", "model"))
    yield from clipping_notes(t.model, t.optim, ("trainer", "optim"))
    yield from router_replay_rule(t, ("trainer",))


def _rl_trace_path(c: Any) -> Iterator[Problem]:
    t = c.trainer
    if t.trace_path is not None and (t.max_steps is None or t.max_steps >= 10):
        yield Problem(
            ("trainer", "trace_path"), "trace_path needs max_steps below 10", "set max_steps = 5 for a traced run"
        )


def _rl_lora_broadcast(c: Any) -> Iterator[Problem]:
    t = c.trainer
    lora = t.model.lora is not None
    for path, wb in (
        (("weight_broadcast",), c.weight_broadcast),
        (("trainer", "weight_broadcast"), t.weight_broadcast),
    ):
        if lora and wb is not None and wb.type in ("nccl", "nixl"):
            yield Problem(
                path + ("type",),
                "LoRA training is not yet supported with in-memory weight broadcast (nccl/nixl)",
                'use `type = "filesystem"`, or drop [trainer.model.lora]',
            )
            break


def _rl_quantized(c: Any) -> Iterator[Problem]:
    t = c.trainer
    wb = c.weight_broadcast or t.weight_broadcast
    quantized = wb is not None and wb.type == "nccl" and getattr(wb, "quantize_in_weight_transfer", False)
    if quantized and (c.inference is None or t.model.impl != "custom"):
        yield Problem(
            ("weight_broadcast", "quantize_in_weight_transfer"),
            'quantize_in_weight_transfer needs [inference] and trainer.model.impl = "custom"',
        )


def _resume(c: Any) -> Iterator[Problem]:
    yield from _resume_rules(c.resume, ("resume",))
    if c.resume is None and hasattr(c, "trainer"):  # RL sub-configs' own tables (the shared one fills them)
        yield from _resume_rules(c.trainer.resume, ("trainer", "resume"))
        yield from _resume_rules(c.orchestrator.resume, ("orchestrator", "resume"))


def _rl_chat_template(c: Any) -> Iterator[Problem]:
    """`validate_shared_tokenizer`: one chat template for trainer, orchestrator and inference."""
    trainer = c.trainer.tokenizer.chat_template if c.trainer.tokenizer else None
    orchestrator = c.orchestrator.tokenizer.chat_template if c.orchestrator.tokenizer else None
    if trainer != orchestrator:
        yield Problem(
            ("orchestrator", "tokenizer", "chat_template"),
            "trainer and orchestrator tokenizers use different chat templates",
            "set chat_template once in the shared [tokenizer] table",
        )
    elif c.inference is not None and c.inference.vllm.chat_template != trainer:
        yield Problem(
            ("inference", "vllm", "chat_template"),
            "inference serves another chat template than the trainer's tokenizer uses",
            "set chat_template once in the shared [tokenizer] table (it fills inference.vllm too)",
        )


def _rl_resume_match(c: Any) -> Iterator[Problem]:
    """Upstream resumes trainer and orchestrator together: their resume tables must agree."""
    t, o = c.trainer.resume, c.orchestrator.resume
    if (t.model_dump() if t else None) == (o.model_dump() if o else None):
        return
    at: Path = ("trainer", "resume") if t is not None else ("orchestrator", "resume")
    yield Problem(
        at,
        f"trainer resume ({t.model_dump() if t else None}) and orchestrator resume "
        f"({o.model_dump() if o else None}) are not the same",
        "set [resume] once at the top level (it fills both), or give both tables the same keys",
    )


def _vlm_dtypes(model: Any, at: Path) -> Iterator[Problem]:
    if model is None or model.vlm is None:
        return
    for key in ("optimization_dtype", "reduce_dtype"):
        if getattr(model, key) != "bfloat16":
            yield Problem(
                at + (key,),
                f"VLM models must use optimization_dtype and reduce_dtype bfloat16 (got {key} = "
                f"{getattr(model, key)!r}) to match vLLM inference",
                f'set {key} = "bfloat16"',
            )
            return


def _rl_vlm(c: Any) -> Iterator[Problem]:
    yield from _vlm_dtypes(c.trainer.model, ("trainer", "model"))


def _sft_vlm(c: Any) -> Iterator[Problem]:
    yield from _vlm_dtypes(c.model, ("model",))


def _sft_batch(c: Any) -> Iterator[Problem]:
    for at, d in _sft_datasets(c):
        yield from _batch_rules(d, at)


def _batch_rules(d: Any, at: Path) -> Iterator[Problem]:
    if d.micro_batch_size > d.batch_size:
        yield Problem(
            at + ("micro_batch_size",),
            f"micro_batch_size ({d.micro_batch_size}) is larger than batch_size ({d.batch_size})",
            "lower micro_batch_size or raise batch_size",
        )
    elif d.batch_size % d.micro_batch_size:
        yield Problem(
            at + ("batch_size",),
            f"batch_size ({d.batch_size}) must be divisible by micro_batch_size ({d.micro_batch_size})",
            f"try batch_size = {d.batch_size - d.batch_size % d.micro_batch_size or d.micro_batch_size}",
        )


def _sft_subsets(c: Any) -> Iterator[Problem]:
    for at, d in _sft_datasets(c):
        if d.type != "sft":
            continue
        lengths = {
            k: len(v)
            for k, v in (("subsets", d.subsets), ("splits", d.splits), ("probabilities", d.probabilities))
            if v is not None
        }
        if len(set(lengths.values())) > 1:
            yield Problem(
                at + (next(iter(lengths)),),
                "subsets, splits and probabilities must have the same length "
                + ", ".join(f"({k}: {n})" for k, n in lengths.items()),
            )


def _sft_seq_len(c: Any) -> Iterator[Problem]:
    for at, d in _sft_datasets(c):
        if d.seq_len % c.model.cp:
            yield Problem(at + ("seq_len",), f"seq_len ({d.seq_len}) must be divisible by model.cp ({c.model.cp})")
        if c.model.cp > 1 and d.micro_batch_size != 1:
            yield Problem(
                at + ("micro_batch_size",),
                f"micro_batch_size must be 1 with context parallelism (model.cp = {c.model.cp})",
                "set micro_batch_size = 1",
            )
        if c.model.vlm is not None and d.micro_batch_size != 1:
            yield Problem(at + ("micro_batch_size",), "VLM SFT needs micro_batch_size = 1", "set micro_batch_size = 1")


def _sft_datasets(c: Any) -> Iterator[tuple[Path, Any]]:
    """The training data and the validation data (when `[val.data]` is set)."""
    yield ("data",), c.data
    if c.val is not None and c.val.data is not None:
        yield ("val", "data"), c.val.data


def _sft_inference(c: Any) -> Iterator[Problem]:
    if c.inference is not None and c.eval is None:
        yield Problem(
            ("inference",),
            "[inference] is only used for online evals, and there is no [eval]",
            "drop [inference], or add an [eval] table with a source",
        )


def _sft_inference_model(c: Any) -> Iterator[Problem]:
    if c.inference is not None and c.inference.vllm.model != c.model.name:
        yield Problem(
            ("inference", "vllm", "model"),
            f"inference serves `{c.inference.vllm.model}` but the trainer trains `{c.model.name}`",
            "drop inference.vllm.model; it follows [model] name",
        )


def _sft_eval(c: Any) -> Iterator[Problem]:
    if c.eval is not None:
        yield from _eval_rules(c.eval, ("eval",))


def _sft_scheduler(c: Any) -> Iterator[Problem]:
    yield from _scheduler_rules(c.scheduler, c.max_steps, ("scheduler",))


def _sft_model(c: Any) -> Iterator[Problem]:
    yield from model_rules(c.model, c.optim, ("model",))
    yield from clipping_notes(c.model, c.optim, ("optim",))


def _sft_trace_path(c: Any) -> Iterator[Problem]:
    if c.trace_path is not None and (c.max_steps is None or c.max_steps >= 10):
        yield Problem(("trace_path",), "trace_path needs max_steps below 10", "set max_steps = 5 for a traced run")


def _rl_batch_kind(c: Any) -> Iterator[Problem]:
    o = c.orchestrator
    if o.batch_size is not None and o.token_batch_size is not None:
        yield Problem(
            ("orchestrator", "token_batch_size"),
            "Set exactly one of batch_size or token_batch_size",
            "remove one of the two",
        )


def _rl_batch_groups(c: Any) -> Iterator[Problem]:
    o = c.orchestrator
    if o.batch_size is not None and o.batch_size % o.group_size:
        yield Problem(
            ("orchestrator", "batch_size"),
            f"batch_size ({o.batch_size}) must be divisible by group_size ({o.group_size}), "
            "the number of samples per problem",
            f"try batch_size = {max(o.group_size, o.batch_size - o.batch_size % o.group_size)}",
        )


def _rl_source_groups(c: Any) -> Iterator[Problem]:
    o = c.orchestrator
    for i, src in enumerate(o.train.source):
        if src.group_size is not None and o.batch_size is not None and o.batch_size % src.group_size:
            yield Problem(
                ("orchestrator", "train", "source", i, "group_size"),
                f"batch_size ({o.batch_size}) must be divisible by this source's group_size ({src.group_size})",
            )


def _rl_inflight(c: Any) -> Iterator[Problem]:
    o = c.orchestrator
    at: Path = ("orchestrator", "concurrency")
    cc = o.concurrency
    if cc.max_inflight is not None and cc.max_inflight < o.group_size:
        yield Problem(
            at + ("max_inflight",),
            f"max_inflight ({cc.max_inflight}) must be at least group_size ({o.group_size})",
        )
    if cc.initial_inflight is not None and cc.initial_inflight < o.group_size:
        yield Problem(
            at + ("initial_inflight",),
            f"initial_inflight ({cc.initial_inflight}) must be at least group_size ({o.group_size})",
        )
    yield from _inflight_bounds(cc, at)


def _sft_concurrency(c: Any) -> Iterator[Problem]:
    if c.eval is not None:
        yield from _inflight_bounds(c.eval.concurrency, ("eval", "concurrency"))


def _inflight_bounds(cc: Any, at: Path) -> Iterator[Problem]:
    """`ConcurrencyConfig.validate_bounds`: initial and min below max (an RL orchestrator's, an
    SFT online eval's)."""
    if cc.max_inflight is None:
        return
    if cc.initial_inflight is not None and cc.initial_inflight > cc.max_inflight:
        yield Problem(
            at + ("initial_inflight",),
            f"initial_inflight ({cc.initial_inflight}) exceeds max_inflight ({cc.max_inflight})",
        )
    if cc.min_inflight > cc.max_inflight:
        yield Problem(
            at + ("min_inflight",),
            f"min_inflight ({cc.min_inflight}) exceeds max_inflight ({cc.max_inflight})",
        )


def _source_rules(sources: list[Any], at: Path, *, required: bool) -> Iterator[Problem]:
    if required and not sources:
        yield Problem(  # upstream takes it (an eval-only run); primenb's engine has nothing to train on
            at,
            "no training environment: [[orchestrator.train.source]] is empty",
            'add [[orchestrator.train.source]] with [orchestrator.train.source.env.taskset] id = "reverse-text"',
            severity="warning",
        )
    seen: dict[str, int] = {}
    for i, src in enumerate(sources):
        taskset_id = src.env.taskset.id if src.env.taskset else None
        if not taskset_id:
            # named where the file stops: the source's missing env, its missing taskset, or the id
            missing = (
                (i, "env")
                if "env" not in src.model_fields_set
                else (i, "env", "taskset")
                if src.env.taskset is None or "taskset" not in src.env.model_fields_set
                else (i, "env", "taskset", "id")
            )
            yield Problem(
                at + missing,
                "no env configured for this source",
                'set [<source>.env.taskset] id = "<taskset id>"',
                code="no-env",
            )
        name = src.name or taskset_id
        if name == "agg":
            yield Problem(
                at + (i, "name"), 'the source name "agg" is reserved for aggregate metrics', "pick another name"
            )
        elif name in seen:
            yield Problem(
                at + (i, "name") if src.name else at + (i, "env", "taskset", "id"),
                f'source name "{name}" is used twice (also by source {seen[name]})',
                "give each source a unique `name`",
            )
        elif name:
            seen[name] = i


def _eval_rules(e: Any, at: Path) -> Iterator[Problem]:
    if not e.source:
        yield Problem(
            at,
            f"[{_fmt(at)}] has no source",
            f"Either drop the [{_fmt(at)}] block or add a [[{_fmt(at)}.source]] block",
        )
    yield from _source_rules(e.source, at + ("source",), required=False)


def _scheduler_rules(s: Any, max_steps: int | None, at: Path) -> Iterator[Problem]:
    if s.type == "linear":
        if s.warmup_steps == 0 and s.decay_steps == 0:
            yield Problem(
                at,
                "a linear scheduler needs warmup_steps or decay_steps above 0",
                'set one of them, or use type = "constant"',
            )
        elif s.decay_steps > 0 and max_steps is None:
            yield Problem(at + ("decay_steps",), "linear decay needs max_steps", "set max_steps at the top level")
        elif max_steps is not None and s.warmup_steps + s.decay_steps > max_steps:
            yield Problem(
                at + ("decay_steps",),
                f"warmup_steps + decay_steps ({s.warmup_steps} + {s.decay_steps}) exceeds max_steps ({max_steps})",
                f"make them sum to at most {max_steps}",
            )
    elif s.type == "cosine":
        if max_steps is None:
            yield Problem(at + ("type",), "a cosine scheduler needs max_steps", "set max_steps at the top level")
        elif s.warmup_steps >= max_steps:
            yield Problem(
                at + ("warmup_steps",),
                f"warmup_steps ({s.warmup_steps}) must be below max_steps ({max_steps})",
                f"try warmup_steps = {max(0, max_steps // 10)}",
            )


def _resume_rules(r: Any, at: Path) -> Iterator[Problem]:
    if r is None:
        return
    if r.step is not None and r.dir is not None:
        yield Problem(at + ("dir",), "set either resume.step or resume.dir, not both")
    if r.dir is not None and checkpoint_step(PurePosixPath(r.dir).name) is None:
        yield Problem(
            at + ("dir",),
            f"resume.dir must end in step_<N> (got `{r.dir}`)",
            "point it at a checkpoint folder, e.g. outputs/my-run/checkpoints/step_10",
        )


def _fmt(path: Path) -> str:
    return ".".join(str(p) for p in path)


RL_CHECKS: tuple[Check, ...] = (
    _rl_batch_kind,
    _rl_batch_groups,
    _rl_source_groups,
    _rl_inflight,
    _rl_sources,
    _rl_eval,
    _rl_max_steps,
    _rl_seq_len,
    _rl_ckpt,
    _rl_wandb,
    _rl_model_names,
    rl_deployment,
    _rl_scheduler,
    _rl_model,
    _rl_trace_path,
    _rl_lora_broadcast,
    _rl_quantized,
    _resume,
    _rl_resume_match,
    _rl_chat_template,
    _rl_vlm,
    rl_renderer,
    rl_deploy_rules,
)
SFT_CHECKS: tuple[Check, ...] = (
    _sft_batch,
    _sft_subsets,
    _sft_seq_len,
    _sft_inference,
    _sft_inference_model,
    _sft_eval,
    sft_deployment,
    _sft_scheduler,
    _sft_model,
    _sft_trace_path,
    _resume,
    _sft_vlm,
    sft_infra,
    _sft_concurrency,
    sft_renderer,
)
