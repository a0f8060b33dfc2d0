"""Which of a trace's models a server serves: its own (``final``, the run's last checkpoint) or the
SFT warm-up an RL run trained its adapter on (``sft_warmup``, the run's ``checkpoints/sft_warmup``).
Spelled here once; the worker's spec, the admin route, the pool's entries and the cards read it."""

from __future__ import annotations

from typing import Literal, get_args

Stage = Literal["final", "sft_warmup"]
FINAL: Stage = "final"
SFT_WARMUP: Stage = "sft_warmup"
STAGES: tuple[Stage, ...] = get_args(Stage)


def parse_stage(value: object) -> Stage:
    """A stage from a spec or a card: unset is ``final``; anything else not a stage is refused."""
    if value is None or value == "":
        return FINAL
    for stage in STAGES:
        if value == stage:
            return stage
    raise ValueError(f"stage {str(value)[:40]!r} is not one of {', '.join(STAGES)}")


__all__ = ["FINAL", "SFT_WARMUP", "STAGES", "Stage", "parse_stage"]
