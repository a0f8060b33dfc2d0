"""Trained models back in the notebook: `load` a checkpoint (adapter applied to its base) and
`generate` completions with it. Imports torch (lazily, on first use).

Knows nothing of traces: `primenb.harness.inference` turns a trace into a `Trained` and calls here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primenb.protocol.fields import DEFAULT_ANSWER_TOKENS

_CACHE: dict[tuple[str, str], tuple[Any, Any]] = {}


@dataclass(frozen=True)
class Trained:
    """What inference needs to know about a trained run: its model, checkpoint and task."""

    key: str  # identifies the run (a trace id) for the one-model cache
    model_id: str
    checkpoint: Path
    base_seed: int = 0
    # the task's prompt format: built by the caller's trust road (the engine never turns a
    # trace's recorded environment id into code itself); None = prompts are used as given
    environment: Callable[[], Any] | None = field(default=None, compare=False)
    default_tokens: int = DEFAULT_ANSWER_TOKENS


def load(trained: Trained, *, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a checkpoint: a full model as saved, or a LoRA adapter applied to
    the base it was trained on. In eval mode."""
    from transformers.utils import logging as hf_logging

    from primenb.engine.models import load_model

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bars in the notebook
    try:
        model, tok, _ = load_model(trained.model_id, seed=trained.base_seed, init_from=str(trained.checkpoint))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    if device:
        model.to(device)
    model.eval()
    return model, tok


def _environment(trained: Trained) -> Any:
    if trained.environment is None:
        return None
    try:
        return trained.environment()
    except Exception as exc:
        warnings.warn(f"{exc}; prompts are used as given", stacklevel=3)
        return None


def generate(
    trained: Trained,
    prompts: str | list[Any],
    *,
    max_new_tokens: int | None = None,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    seed: int | None = None,
    raw: bool = False,
) -> str | list[str]:
    """Completions from a trace's model. Prompts are shown to the model as in training (the
    environment's prompt format, or chat template) unless ``raw=True``. ``temperature=0`` is greedy
    decoding; otherwise sampling with ``temperature``/``top_p``/``top_k`` (``seed`` makes it
    repeatable). A single prompt string gives a single completion."""
    import torch

    from primenb.engine.chat import trains_on_chat
    from primenb.engine.evaluation import render_prompts

    key = (trained.key, str(trained.checkpoint))
    if key not in _CACHE:
        _CACHE.clear()  # keep one model in memory
        _CACHE[key] = load(trained)
    model, tok = _CACHE[key]
    single = isinstance(prompts, str)
    items = [prompts] if single else list(prompts)
    chat = trains_on_chat(tok)
    env = None if raw else _environment(trained)
    shown = [env.format_prompt(p, chat=chat) if env is not None else p for p in items]
    texts, templated = render_prompts(tok, shown)
    enc = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=not templated).to(
        next(model.parameters()).device
    )
    gen_kwargs: dict[str, Any] = {
        "max_new_tokens": int(max_new_tokens or trained.default_tokens),
        "pad_token_id": tok.pad_token_id,
        "eos_token_id": tok.eos_token_id,
    }
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
    completions = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return completions[0] if single else completions


__all__ = ["Trained", "generate", "load"]
