"""Trained models back in the notebook: `load` a trace's final model (adapter applied) and
`generate` completions with it. Imports torch (lazily, on first use)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.harness.trace import Trace, get

_CACHE: dict[tuple[str, str], tuple[Any, Any]] = {}


def _checkpoint(trace: Trace, checkpoint: str | None) -> Path:
    ckpt = Path(checkpoint) if checkpoint else trace.final_checkpoint
    if ckpt is None or not ckpt.is_dir():
        raise PrimenbError(f"trace {trace.id} ({trace.name}) has no checkpoint to load"
                           f"{f' ({ckpt} is missing)' if ckpt else ''}")  # fmt: skip
    return ckpt


def load(ref: Any, *, checkpoint: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a trace's final checkpoint (or ``checkpoint``): a full model as
    saved, or a LoRA adapter applied to the base it was trained on. In eval mode."""
    from primenb.engine.models import load_model

    trace = get(ref)
    ckpt = _checkpoint(trace, checkpoint)
    base_seed = ((trace.model.get("base") or {}).get("seed")) or (trace.config.get("primenb") or {}).get("seed") or 0
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bars in the notebook
    try:
        model, tok, _ = load_model(str(trace.model.get("id") or "primenb/tiny-byte"), seed=int(base_seed),
                                   init_from=str(ckpt))  # fmt: skip
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if device:
        model.to(device)
    model.eval()
    return model, tok


def _environment(trace: Trace) -> Any:
    from primenb.envs import get_environment

    sources = (trace.data.get("train") or {}).get("sources") or []
    for src in sources:
        if src.get("env_id"):
            try:
                return get_environment(src["env_id"], **(src.get("args") or {}))
            except Exception as exc:
                warnings.warn(f"environment {src['env_id']!r} cannot be built here ({exc}); prompts are used "
                              "as given", stacklevel=3)  # fmt: skip
                return None
    return None


def _default_tokens(trace: Trace) -> int:
    c = trace.config
    for path in (("orchestrator", "train", "sampling", "max_completion_tokens"),
                 ("orchestrator", "eval", "sampling", "max_completion_tokens"),
                 ("eval", "sampling", "max_completion_tokens")):  # fmt: skip
        node: Any = c
        for p in path:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, int) and node > 0:
            return node
    return 64


def generate(ref: Any, prompts: str | list[Any], *, max_new_tokens: int | None = None,
             temperature: float = 0.0, top_p: float = 1.0, top_k: int | None = None, seed: int | None = None,
             raw: bool = False, checkpoint: str | None = None) -> str | list[str]:  # fmt: skip
    """Completions from a trace's model. Prompts are shown to the model as in training (the
    environment's prompt format, or chat template) unless ``raw=True``. ``temperature=0`` is greedy
    decoding; otherwise sampling with ``temperature``/``top_p``/``top_k`` (``seed`` makes it
    repeatable). A single prompt string gives a single completion."""
    import torch

    from primenb.engine.evaluation import render_prompts

    trace = get(ref)
    ckpt = _checkpoint(trace, checkpoint)
    key = (trace.id, str(ckpt))
    if key not in _CACHE:
        _CACHE.clear()  # keep one model in memory
        _CACHE[key] = load(trace, checkpoint=checkpoint)
    model, tok = _CACHE[key]
    single = isinstance(prompts, str)
    items = [prompts] if single else list(prompts)
    chat = tok.chat_template is not None
    env = None if raw else _environment(trace)
    shown = [env.format_prompt(p, chat=chat) if env is not None else p for p in items]
    texts, templated = render_prompts(tok, shown)
    enc = tok(texts, return_tensors="pt", padding=True, padding_side="left",
              add_special_tokens=not templated).to(next(model.parameters()).device)  # fmt: skip
    gen_kwargs: dict[str, Any] = {"max_new_tokens": int(max_new_tokens or _default_tokens(trace)),
                                  "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id}  # fmt: skip
    if temperature and temperature > 0:
        gen_kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p))
        if top_k is not None:
            gen_kwargs["top_k"] = int(top_k)
    else:
        gen_kwargs["do_sample"] = False
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(int(seed))
        out = model.generate(**enc, **gen_kwargs)
    completions = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return completions[0] if single else completions


__all__ = ["generate", "load"]
