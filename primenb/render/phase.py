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
    # the steps still to come in the stepped phases *other* than this one, in order: what a
    # whole-run ETA adds to this phase's own remaining steps
    ahead: tuple[tuple[str, int], ...] = ()

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
    main_left = max(0, _int(status.get("max_steps")) - _int(status.get("step")))
    ahead: tuple[tuple[str, int], ...] = ()
    if phase == SFT_WARMUP:
        label = "SFT warm-up"
        step = _int(status.get("phase_step"), _int(status.get("warmup_step")))
        total = _int(status.get("phase_total"), _int(status.get("warmup_steps"))) or None
        main = _int(status.get("max_steps"))
        if main:  # the warm-up is not the whole run: say what still comes after it
            then = f"then {MAIN_LABEL.get(str(mode), 'training')}: {main} steps"
            ahead = ((TRAINING, main_left),)
    elif phase in (TRAINING, DONE) or state in FINAL_STATES:
        label = MAIN_LABEL.get(str(mode), "training")
        step = _int(status.get("step"))
        total = _int(status.get("max_steps")) or None
        phase = TRAINING if phase == DONE or state in FINAL_STATES else phase
    else:
        label = WAITING_TEXT.get(phase, f"{phase}…")
        step, total = 0, None
        # between steps (building the trainer after the warm-up, saving a checkpoint): what is left
        warm_left = max(0, _int(status.get("warmup_steps")) - _int(status.get("warmup_step")))
        ahead = tuple((name, n) for name, n in ((SFT_WARMUP, warm_left), (TRAINING, main_left)) if n)
    return Progress(state, phase, label, step, total, then, ahead)


@dataclass(frozen=True)
class Eta:
    """Seconds until the run ends. ``estimated``: it counts steps of a phase not timed yet (GRPO
    during the warm-up) at the pace of one that was; ``whole``: it covers phases after this one."""

    seconds: float
    estimated: bool = False
    whole: bool = False

    def __str__(self) -> str:
        text = f"ETA {'~' if self.estimated else ''}{duration(self.seconds)}"
        return text + (" for the whole run" if self.whole else "")


class EtaClock:
    """The time left in the whole run, from the pace of each stepped phase (seconds per step).

    A phase's pace is measured from its first *completed* step on: the time before it (the first
    generation, a step-0 eval, compilation) is not a step's cost, and counting it made early ETAs
    about twice too long. Steps of a phase not timed yet (GRPO while the warm-up runs) count at
    the pace last measured, and the ETA says it is an estimate; the time between phases (saving
    the warm-up, building the GRPO trainer) is not counted."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._phase: tuple[str, int] | None = None  # the phase and the step it was first seen at
        self._origin: tuple[float, int] | None = None  # when its first step completed, and which
        self._pace: dict[str, float] = {}  # seconds per step of each phase timed so far
        self._last_pace: float | None = None  # the newest measurement of any phase
        self._since: tuple[str, float] | None = None  # the phase shown and when it was first seen
        self._seen: tuple[float, int] | None = None  # when the current step was first seen, and it

    def waited(self, p: Progress) -> float:
        """Seconds since the phase ``p`` shows was first seen (a waiting line's counter)."""
        now = self.clock()
        if self._since is None or self._since[0] != p.phase:
            self._since = (p.phase, now)
        return now - self._since[1]

    def eta(self, p: Progress) -> Eta | None:
        if p.state != RUNNING:
            return None
        now = self.clock()
        left = 0.0
        estimated = False
        if p.counting:
            pace = self._measure(p, now)
            if pace is None:
                if self._last_pace is None:
                    return None
                pace, estimated = self._last_pace, True  # this phase not timed yet
            left = ((p.total or 0) - p.step) * pace
            if self._seen is not None and self._seen[1] == p.step:  # part of the next step is done
                left -= min(pace, now - self._seen[0])
        for phase, steps in p.ahead:
            pace = self._pace.get(phase)
            if pace is None:
                if self._last_pace is None:
                    return None
                pace, estimated = self._last_pace, True
            left += steps * pace
        if not p.counting and not p.ahead:
            return None
        return Eta(max(0.0, left), estimated, whole=bool(p.ahead))

    def _measure(self, p: Progress, now: float) -> float | None:
        """This phase's pace (and remember it), or None before two of its steps completed.

        Measured when a new step is first seen, not at every look: status.json is written about
        once a second, so a step seen again 0.5 s later has not taken 0.5 s longer."""
        if self._seen is None or self._seen[1] != p.step:
            self._seen = (now, p.step)
        if self._phase is None or self._phase[0] != p.phase or p.step < self._phase[1]:
            self._phase, self._origin = (p.phase, p.step), None
            return self._pace.get(p.phase) if p.step > 0 else None
        if self._origin is None:
            if p.step > self._phase[1]:
                self._origin = (now, p.step)
            return None
        t0, s0 = self._origin
        seen_at, step = self._seen
        if step > s0 and seen_at > t0:
            self._pace[p.phase] = self._last_pace = (seen_at - t0) / (step - s0)
        return self._pace.get(p.phase)


def duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def phase_line(p: Progress, eta: Eta | float | None = None, waited: float | None = None) -> str:
    """``SFT warm-up · step 12/40 · ETA ~1m08s for the whole run · then training (GRPO): 30 steps``
    or ``building the model… (12s)``: one line, plain text. ``waited``: seconds in a phase that
    counts no steps (a line that ticks says the engine is alive)."""
    if p.state in FINAL_STATES:
        return f"{p.state} at step {p.step}/{p.total or '?'}"
    if isinstance(eta, (int, float)):
        eta = Eta(float(eta))
    if not p.counting:
        text = p.label + (f" ({duration(waited)})" if waited is not None and waited >= 1 else "")
        return text + (f" · {eta}" if eta is not None else "")
    text = f"{p.label} · step {p.step}/{p.total}"
    text += f" · {eta}" if eta is not None else ""
    return text + (f" · {p.then}" if p.then else "")


__all__ = ["WAITING_TEXT", "Eta", "EtaClock", "Progress", "duration", "phase_line", "progress"]
