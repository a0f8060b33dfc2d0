"""The tensors of a decoding batch: one forward step over rows of different lengths and adapters,
and the key/value cache of rows that join and leave.

Rows are padded on the left: each row keeps its own position ids, and the attention mask hides
its padding. Stacking a newly prefilled batch under a running one pads the shorter cache on the
left; when rows leave, the leading columns every remaining row pads are cut off.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicLayer

BASE_ROW = "__base__"  # PEFT's name for "no adapter" in a mixed batch


_CACHE_KW: dict[type, str] = {}


def _cache_kw(model: Any) -> str:
    """``cache`` (transformers >= 5.2x) or ``past_key_values`` (earlier), as the model's forward names it."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    kind = type(inner)
    if kind not in _CACHE_KW:
        params = inspect.signature(inner.forward).parameters
        _CACHE_KW[kind] = "cache" if "cache" in params else "past_key_values"
    return _CACHE_KW[kind]


def forward(
    model: Any,
    ids: torch.Tensor,
    mask: torch.Tensor,
    pos: torch.Tensor,
    cache: Any,
    adapters: list[str] | None,
    *,
    last_only: bool = True,
) -> torch.Tensor:
    """Logits of the last position of each row (``[rows, vocab]``), or of every position."""
    past = cache.get_seq_length()
    kwargs: dict[str, Any] = {
        "input_ids": ids,
        "attention_mask": mask,
        "position_ids": pos,
        "use_cache": True,
        "cache_position": torch.arange(past, past + ids.shape[1], device=ids.device),
        _cache_kw(model): cache,
    }
    if last_only:
        kwargs["logits_to_keep"] = 1
    with _adapters(model, adapters, kwargs):
        logits = model(**kwargs).logits
    return logits[:, -1] if last_only else logits


def _adapters(model: Any, adapters: list[str] | None, kwargs: dict[str, Any]) -> Any:
    """How a step picks its adapters. Rows of several: PEFT's mixed batch (``adapter_names``, a hook
    on every LoRA layer per forward); rows of one adapter: that adapter made active (no hooks, the
    same arithmetic); rows of the base alone: the adapters disabled."""
    names = set(adapters or ())
    if not names:
        return contextlib.nullcontext()
    if names == {BASE_ROW}:
        return model.disable_adapter()
    if len(names) == 1:
        name = names.pop()
        if model.active_adapter != name:
            model.set_adapter(name)
        return contextlib.nullcontext()
    kwargs["adapter_names"] = adapters
    return contextlib.nullcontext()


def device_of(model: Any) -> torch.device:
    return next(model.parameters()).device


def stackable(cache: Any) -> bool:
    """Whether rows can join this cache mid-flight: plain full-attention layers only (a sliding
    window's cache is not a padded prefix)."""
    return all(type(layer) is DynamicLayer for layer in cache.layers)


def stack(old: Any, old_mask: torch.Tensor | None, new: Any, new_mask: torch.Tensor) -> tuple[Any, torch.Tensor]:
    """The running rows' cache with newly prefilled rows under it, both padded on the left to one
    length; ``old`` may be None (nothing running)."""
    if old is None or old_mask is None:
        return new, new_mask
    a_len, b_len = old_mask.shape[1], new_mask.shape[1]
    width = max(a_len, b_len)
    for a, b in zip(old.layers, new.layers, strict=True):
        a.keys = torch.cat([_pad_left(a.keys, width - a_len), _pad_left(b.keys, width - b_len)])
        a.values = torch.cat([_pad_left(a.values, width - a_len), _pad_left(b.values, width - b_len)])
    return old, torch.cat([F.pad(old_mask, (width - a_len, 0)), F.pad(new_mask, (width - b_len, 0))])


def _pad_left(t: torch.Tensor, n: int) -> torch.Tensor:
    return F.pad(t, (0, 0, n, 0)) if n else t  # [rows, heads, length, dim]: pad the length


def trim(cache: Any, mask: torch.Tensor) -> torch.Tensor:
    """Cut the leading cache columns that every row pads (their long neighbours left); the mask
    that goes with the cache after."""
    used = mask.sum(0).nonzero()
    start = int(used[0]) if used.numel() else 0
    if start == 0:
        return mask
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, start:]
        layer.values = layer.values[:, :, start:]
    return mask[:, start:]


__all__ = ["BASE_ROW", "device_of", "forward", "stack", "stackable", "trim"]
