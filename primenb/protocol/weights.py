"""What a served model's weights are, in one vocabulary (the pool's entries, the cards' ``kind``, the
ids the client makes): ``base`` (a model as named), ``adapter`` (LoRA weights over a base) or
``full`` (a fine-tune with weights of its own). A trace's ``finetune`` says the same in prime-rl's
words (``lora`` / ``full``): `from_finetune` reads it into this one."""

from __future__ import annotations

from typing import Literal, get_args

Weights = Literal["base", "adapter", "full"]
BASE: Weights = "base"
ADAPTER: Weights = "adapter"
FULL: Weights = "full"
WEIGHTS: tuple[Weights, ...] = get_args(Weights)
_FINETUNE: dict[object, Weights] = {"lora": ADAPTER, "full": FULL}  # prime-rl's words


def from_finetune(finetune: object) -> Weights | None:
    """A trace's recorded ``finetune`` in this vocabulary; None when it records none we know."""
    return _FINETUNE.get(finetune)


__all__ = ["ADAPTER", "BASE", "FULL", "WEIGHTS", "Weights", "from_finetune"]
