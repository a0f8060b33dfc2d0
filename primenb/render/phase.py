"""What a run is doing now, in words and numbers: the phase line, the bar and its ETA.

Pure functions of ``status.json`` (and a clock), shared by the live monitor and the static views.
Runs written before ``phase_step``/``phase_total`` existed fall back to ``step``/``max_steps``
(and ``warmup_step``/``warmup_steps`` during a warm-up).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from primenb.protocol.rundir import (
    BUILDING_MODEL,
    BUILDING_TRAINER,
    DONE,
    FINAL_STATES,
    IMPORTING,
    QUEUED,
    RUNNING,
    SAVING,
    SFT_WARMUP,
    STARTING,
    TRAINING,
    State,
)

# the line shown before a phase has steps to count (it must say what is happening, not be empty)
WAITING_TEXT = {
    QUEUED: "queued: waiting for the backend to start the engine",
    STARTING: "starting the engine process…",
    IMPORTING: "importing torch, transformers and TRL…",
    BUILDING_MODEL: "building the model…",
    BUILDING_TRAINER: "building the trainer (data, reward functions)…",
    SAVING: "saving a checkpoint…",
    DONE: "finishing…",
}
STEPPED = (SFT_WARMUP, TRAINING)
MAIN_LABEL = {"rl": "training (GRPO)", "sft": "training (SFT)"}


@dataclass(frozen=True)
class Progress:
    """Where a run stands: its phase, a label for it, and the step count within it."""

    state: str
    phase: str
    label: str
    step: int
    total: int | None
    then: str = ""  # what follows this phase ("then training (GRPO): 30 steps"), when known

    @property
    def fraction(self) -> float:
        if self.state == State.COMPLETED:
            return 1.0
        return min(1.0, self.step / self.total) if self.total else 0.0

    @property
    def counting(self) -> bool:
        """Whether the phase counts steps (the bar and ETA mean something)."""
        return self.phase in STEPPED and bool(self.total)


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def progress(status: dict[str, Any]) -> Progress:
    state = str(status.get("state") or QUEUED)
    phase = str(status.get("phase") or (TRAINING if _int(status.get("step")) else STARTING))
    if state == QUEUED:
        phase = QUEUED
    mode = status.get("mode")
    then = ""
    if phase == SFT_WARMUP:
        label = "SFT warm-up"
        step = _int(status.get("phase_step"), _int(status.get("warmup_step")))
        total = _int(status.get("phase_total"), _int(status.get("warmup_steps"))) or None
        main = _int(status.get("max_steps"))
        if main:  # the warm-up's ETA is not the run's: say what still comes after it
            then = f"then {MAIN_LABEL.get(str(mode), 'training')}: {main} steps"
    elif phase in (TRAINING, DONE) or state in FINAL_STATES:
        label = MAIN_LABEL.get(str(mode), "training")
        step = _int(status.get("step"))
        total = _int(status.get("max_steps")) or None
        phase = TRAINING if phase == DONE or state in FINAL_STATES else phase
    else:
        label = WAITING_TEXT.get(phase, f"{phase}…")
        step, total = 0, None
    return Progress(state, phase, label, step, total, then)


class EtaClock:
    """Steps per second within the current phase (restarted when the phase changes).

    The rate is measured from the phase's first *completed* step on: the time before it (the
    first generation, a step-0 eval, compilation) is not a step's cost, and counting it made
    early ETAs about twice too long."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._phase: tuple[str, int] | None = None  # the phase and the step it was first seen at
        self._origin: tuple[float, int] | None = None  # when its first step completed, and which

    def eta(self, p: Progress) -> float | None:
        if not p.counting or p.state != RUNNING:
            return None
        now = self.clock()
        if self._phase is None or self._phase[0] != p.phase or p.step < self._phase[1]:
            self._phase, self._origin = (p.phase, p.step), None
            return None
        if self._origin is None:
            if p.step > self._phase[1]:
                self._origin = (now, p.step)
            return None
        t0, s0 = self._origin
        if p.step <= s0 or now <= t0 or p.total is None:
            return None
        return (p.total - p.step) / ((p.step - s0) / (now - t0))


def duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def phase_line(p: Progress, eta: float | None = None) -> str:
    """``SFT warm-up · step 12/40 · ETA 8s`` or ``building the model…``: one line, plain text."""
    if p.state in FINAL_STATES:
        return f"{p.state} at step {p.step}/{p.total or '?'}"
    if not p.counting:
        return p.label
    text = f"{p.label} · step {p.step}/{p.total}"
    text += f" · ETA {duration(eta)}" if eta is not None else ""
    return text + (f" · {p.then}" if p.then else "")


__all__ = ["WAITING_TEXT", "EtaClock", "Progress", "duration", "phase_line", "progress"]
