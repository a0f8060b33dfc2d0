"""The whole run's ETA: a cost model per stepped phase, fed by the pace each phase shows.

A run with an SFT warm-up has two stepped phases whose steps cost very different amounts: a
warm-up step is one forward/backward pass over a batch of short answers, a GRPO step generates a
completion for every rollout, token by token, scores it and then trains on it. Counting GRPO's
steps at the warm-up's pace made the whole-run ETA 2-3x too short for the whole warm-up, then jump
~4x when GRPO started. So:

- each phase's pace is measured from its own steps once two of them have completed;
- before GRPO is timed, a GRPO step costs the warm-up's pace times ``grpo_per_sft``: the plan's
  rollouts x completion tokens times a constant calibrated on recorded runs (`bench/record_eta.py`
  records one, `bench/eta_replay.py` prints the ETA's error over time on all of them);
- the time already spent in the current step counts: a step that is taking longer than its
  estimate pushes the ETA out while it runs, instead of the ETA standing still for 30-40 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from primenb.protocol.rundir import RUNNING, SFT_WARMUP, TRAINING

if TYPE_CHECKING:
    from primenb.render.phase import Progress

# Warm-up steps (batch 64) one GRPO step costs, per rollout x completion token of the GRPO step.
# Measured by bench/record_eta.py on this engine (tiny byte model, reverse-text, batch 32, CPU, a
# shared 2-core machine): 100 tokens -> a GRPO step 5.1x a warm-up step (1.59e-3 per
# rollout-token), 200 tokens -> 10.6x (1.66e-3). Recordings from an older engine gave a third of
# that (5.3e-4 and 5.8e-4): the constant is a prior that GRPO's own pace replaces after two steps.
GRPO_COST_PER_ROLLOUT_TOKEN = 1.6e-3
# When the plan is not known (a run written before status.json said it, a remote platform):
# a GRPO step as 4 warm-up steps, the middle of the 3-6x the JupyterLab runs showed.
DEFAULT_GRPO_PER_SFT = 4.0
STATUS_LAG_S = 1.0  # the engine's status.json throttle during stepped phases
WINDOW = 5  # steps a phase's pace is measured over, once it has run that many


def grpo_per_sft(step_plan: Mapping[str, Any] | None) -> float:
    """How many warm-up steps one GRPO step costs, from the plan status.json records."""
    if not isinstance(step_plan, Mapping):
        return DEFAULT_GRPO_PER_SFT
    rollouts, tokens = step_plan.get("rollouts"), step_plan.get("max_tokens")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (rollouts, tokens)):
        return DEFAULT_GRPO_PER_SFT
    assert isinstance(rollouts, int) and isinstance(tokens, int)
    return max(0.05, GRPO_COST_PER_ROLLOUT_TOKEN * rollouts * tokens)


def duration(seconds: float) -> str:
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


@dataclass(frozen=True)
class Eta:
    """Seconds until the run ends. ``estimated``: it counts steps of a phase not timed yet (GRPO
    during the warm-up) from the cost model; ``whole``: it covers phases after this one."""

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
    about twice too long. Steps of a phase not timed yet count at the cost model's estimate (see
    the module), and the ETA says it is an estimate; the time between phases (saving the warm-up,
    building the GRPO trainer) is not counted."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._phase: tuple[str, int] | None = None  # the phase and the step it was first seen at
        self._origin: tuple[float, int] | None = None  # when its first step completed, and which
        self._pace: dict[str, float] = {}  # seconds per step of each phase timed so far
        self._since: tuple[str, float] | None = None  # the phase shown and when it was first seen
        self._seen: tuple[float, int] | None = None  # when the current step was first seen, and it
        self._marks: list[tuple[float, int]] = []  # (when first seen, step) of this phase since its origin

    def waited(self, p: Progress) -> float:
        """Seconds since the phase ``p`` shows was first seen (a waiting line's counter)."""
        now = self.clock()
        if self._since is None or self._since[0] != p.phase:
            self._since = (p.phase, now)
        return now - self._since[1]

    def pace(self, phase: str, ratio: float) -> tuple[float, bool] | None:
        """Seconds per step of ``phase``: measured, or (estimated=True) converted from a phase
        that was timed with the cost model's ``ratio`` (GRPO step / warm-up step)."""
        if phase in self._pace:
            return self._pace[phase], False
        cost = {SFT_WARMUP: 1.0, TRAINING: ratio}
        for timed, pace in self._pace.items():
            if timed in cost and phase in cost:
                return pace * cost[phase] / cost[timed], True
        if self._pace:  # a phase the model does not know: the pace last measured
            return list(self._pace.values())[-1], True
        return None

    def eta(self, p: Progress) -> Eta | None:
        if p.state != RUNNING:
            return None
        now = self.clock()
        left = 0.0
        estimated = False
        if p.counting:
            measured = self._measure(p, now)
            known = self.pace(p.phase, p.grpo_per_sft) if measured is None else (measured, False)
            if known is None:
                return None
            pace, estimated = known
            assert self._seen is not None
            # the next step has been running at least this long (status.json is written about once
            # a second, so a step first seen now may have ended up to a second ago)
            in_step = max(0.0, now - self._seen[0] - STATUS_LAG_S)
            if estimated:  # this phase is not timed: its step takes at least what this one has taken
                pace = max(pace, in_step)
            elif self._origin is not None and in_step > pace:  # a slow step: let it weigh in
                n = max(1, p.step - self._origin[1])
                pace = (pace * n + in_step) / (n + 1)
            left = ((p.total or 0) - p.step) * pace - min(pace, in_step)
        for phase, steps in p.ahead:
            known = self.pace(phase, p.grpo_per_sft)
            if known is None:
                return None
            left += steps * known[0]
            estimated = estimated or known[1]
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
                self._marks = [self._origin]
            return None
        seen_at, step = self._seen
        if step > self._marks[-1][1] and seen_at > self._marks[-1][0]:
            self._marks.append((seen_at, step))
            # the pace of the last WINDOW steps (all of them, early on): a run's steps change pace
            # as it trains (GRPO's completions get shorter as the model learns to stop)
            t0, s0 = next(((t, s) for t, s in reversed(self._marks) if step - s >= WINDOW), self._marks[0])
            self._pace[p.phase] = (seen_at - t0) / (step - s0)
        return self._pace.get(p.phase)


__all__ = [
    "DEFAULT_GRPO_PER_SFT",
    "GRPO_COST_PER_ROLLOUT_TOKEN",
    "Eta",
    "EtaClock",
    "duration",
    "grpo_per_sft",
]
