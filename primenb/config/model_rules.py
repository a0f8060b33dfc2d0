"""Upstream's trainer-model validators: which implementation, attention, parallelism, offload and
optimizer settings go together (prime-rl's `ModelConfig`, and the `TrainerConfig` / `SFTConfig`
validators that read the model). Each names the key to change; upstream names the whole
`[trainer.model]` / `[model]` table, and stops at the first it breaks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from primenb.config.positions import Path
from primenb.config.problem import Problem

_CUSTOM_OR_AUTO = ("custom", "auto")


def model_rules(model: Any, optim: Any, at: Path) -> Iterator[Problem]:
    """`model` is a trainer `ModelConfig` at `at`; `optim` the optimizer that trains it."""
    yield from _implementation(model, at)
    yield from _offload(model, optim, at)
    if model.vlm is not None and not model.vlm.freeze_vision_encoder and model.lora is not None:
        yield Problem(
            at + ("vlm", "freeze_vision_encoder"),
            "freeze_vision_encoder = false does not go with LoRA (LoRA freezes every non-adapter weight, "
            "the vision encoder included)",
            "drop freeze_vision_encoder, or train without [lora]",
        )
    if optim.type == "muon" and model.fsdp_cpu_offload:
        yield Problem(at + ("fsdp_cpu_offload",), "the muon optimizer does not support fsdp_cpu_offload")


def _needs_custom(at: Path, key: str, what: str, impl: str) -> Problem:
    return Problem(
        at + (key,),
        f'{what} needs impl = "custom" or "auto" (got impl = "{impl}")',
        'set impl = "auto" (the default), or drop it',
    )


def _implementation(model: Any, at: Path) -> Iterator[Problem]:
    impl = model.impl
    custom = impl in _CUSTOM_OR_AUTO
    if model.trust_remote_code and impl not in ("hf", "auto"):
        yield Problem(
            at + ("trust_remote_code",),
            f'trust_remote_code works only with impl = "hf" or "auto" (got impl = "{impl}")',
            'set impl = "auto", or drop trust_remote_code',
        )
    if model.vlm is not None and impl != "custom":
        yield Problem(at + ("impl",), f'VLM training needs impl = "custom" (got "{impl}")', 'set impl = "custom"')
    if model.vlm is not None and model.cp > 1 and model.cp_style != "ulysses":
        yield Problem(
            at + ("cp_style",),
            f'a VLM needs cp_style = "ulysses" for context parallelism (cp = {model.cp})',
            'set cp_style = "ulysses", or cp = 1',
        )
    if model.cp > 1 and not custom:
        yield _needs_custom(at, "cp", f"context parallelism (cp = {model.cp})", impl)
    ac = model.ac
    if ac is not None and ac.mode == "selective":
        if not ac.targets:
            yield Problem(at + ("ac", "targets"), "selective activation checkpointing needs at least one target")
        if not custom:
            yield _needs_custom(at, "ac", "selective activation checkpointing", impl)
    if model.attn in ("flash_attention_4", "auto") and not custom:
        # "auto" may pick FlashAttention 4 on Blackwell GPUs: the same constraint
        yield _needs_custom(at, "impl", f'attn = "{model.attn}" (FlashAttention 4 may be chosen)', impl)
    if model.quantization is not None and not custom:
        yield _needs_custom(at, "quantization", f"{model.quantization.type} training", impl)
    if model.ep_comm_backend != "torch" and isinstance(model.ep, int) and model.ep <= 1:
        yield Problem(
            at + ("ep_comm_backend",),
            f'ep_comm_backend = "{model.ep_comm_backend}" needs expert parallelism (ep > 1, got {model.ep})',
            'set ep above 1, or ep_comm_backend = "torch"',
        )
    if model.quantization is not None and model.quantization.type == "mxfp8" and model.ep_comm_backend != "torch":
        yield Problem(
            at + ("quantization",),
            f'MXFP8 quantization needs ep_comm_backend = "torch" (got "{model.ep_comm_backend}")',
        )
    if model.ep not in (1, "auto") and not custom:
        yield _needs_custom(at, "ep", f"expert parallelism (ep = {model.ep})", impl)


def _offload(model: Any, optim: Any, at: Path) -> Iterator[Problem]:
    full = model.full_offload is not None
    if model.fsdp_cpu_offload and (model.optim_cpu_offload or full):
        yield Problem(
            at + ("fsdp_cpu_offload",),
            "fsdp_cpu_offload does not go with optimizer CPU offload (optim_cpu_offload is on by default)",
            "set optim_cpu_offload = false (and drop full_offload), or drop fsdp_cpu_offload",
        )
    elif model.optim_cpu_offload and full:
        yield Problem(
            at + ("full_offload",),
            "full_offload needs optim_cpu_offload = false (it is on by default)",
            "add optim_cpu_offload = false",
        )
    if full and optim.type not in ("adamw", "sign_sgd"):
        yield Problem(at + ("full_offload",), f"full_offload supports only adamw and sign_sgd, not {optim.type}")


def clipping_notes(model: Any, optim: Any, optim_at: Path) -> Iterator[Problem]:
    """What upstream changes with a warning: gradient clipping is switched off under DeepEP and
    full optimizer offload, so a `max_norm` the file sets is not applied there."""
    if optim.max_norm is None or "max_norm" not in optim.model_fields_set:
        return  # the default is switched off silently; a value the file sets is worth a word
    why = (
        "DeepEP (ep_comm_backend)"
        if model.ep_comm_backend == "deepep"
        else "full optimizer offload"
        if model.full_offload is not None
        else None
    )
    if why:
        yield Problem(
            optim_at + ("max_norm",),
            f"prime-rl disables gradient clipping with {why}: max_norm = {optim.max_norm} is not applied",
            "drop max_norm (or set it to None)",
            severity="warning",
        )


def router_replay_rule(trainer: Any, at: Path) -> Iterator[Problem]:
    if trainer.enable_router_replay and trainer.model.impl not in _CUSTOM_OR_AUTO:
        yield _needs_custom(at, "enable_router_replay", "router replay", trainer.model.impl)


__all__ = ["clipping_notes", "model_rules", "router_replay_rule"]
