"""The whole run's ETA: a cost model per stepped phase, fed by the pace each phase shows.

A run with an SFT warm-up has two stepped phases whose steps cost very different amounts: a
warm-up step is one forward/backward pass over a batch of short answers, a GRPO step generates a
completion for every rollout, token by token, scores it and then trains on it. Counting GRPO's
steps at the warm-up's pace made the whole-run ETA 2-3x too short for the whole warm-up, then jump
~4x when GRPO started. So:

- each phase's pace is measured from its own steps once two of them have completed, as a
  recency-weighted mean over the phase (`EtaClock` says why not the last 5 steps);
- before GRPO is timed, a GRPO step costs the warm-up's pace times ``grpo_per_sft``: the plan's
  rollouts x completion tokens times a constant calibrated on recorded runs (`bench/record_eta.py`
  records one, `bench/eta_replay.py` prints the ETA's error over time on all of them), and it
  stays in GRPO's pace as a few steps' worth of evidence that GRPO's own steps outweigh;
- the time already spent in the current step counts: a step that is taking longer than its
  estimate pushes the ETA out while it runs, instead of the ETA standing still for 30-40 s;
- the ETA shown moves at most 2x per 10 s beyond counting down, and after the last step it counts
  the run's tail (final eval, save), never showing 0 while the run runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from primenb.protocol.rundir import DONE, RUNNING, SAVING, SFT_WARMUP, TRAINING

if TYPE_CHECKING:
    from primenb.render.phase import Progress

# Warm-up steps (batch 64) one GRPO step costs, per rollout x completion token of the GRPO step.
# Measured by bench/record_eta.py on this engine (tiny byte model, reverse-text, batch 32, CPU, a
# shared 2-core machine): 100 tokens -> a GRPO step 5.1x a warm-up step (1.59e-3 per
# rollout-token), 200 tokens -> 10.6x (1.66e-3). Recordings from an older engine gave a third of
# that (5.3e-4 and 5.8e-4); on 2026-12-06 with a bursty load beside it, 2.1e-3 (100 tokens) and,
# where the load slowed the warm-up 18x and GRPO far less, 2.7e-4: the constant is a prior, which
# GRPO's own steps outweigh (PRIOR_STEPS).
GRPO_COST_PER_ROLLOUT_TOKEN = 1.6e-3
# When the plan is not known (a run written before status.json said it, a remote platform):
# a GRPO step as 4 warm-up steps, the middle of the 3-6x the JupyterLab runs showed.
DEFAULT_GRPO_PER_SFT = 4.0
STATUS_LAG_S = 1.0  # the engine's status.json throttle during stepped phases
HALF_LIFE = 10.0  # steps: a step's weight in its phase's pace halves every HALF_LIFE newer steps
PRIOR_STEPS = 4.0  # steps of evidence the cost model's estimate counts as, once a phase has its own
STALL_CAP = 3.0  # a stretch of steps counts at most this many times the phase's pace so far
SWING = 2.0  # the most the ETA shown moves in 10 s beyond counting down
SWING_FLOOR_S = 10.0  # ... and up, as if from at least this many seconds
TAIL_STEPS = 0.25  # the run's tail after its last step (final eval, save), in steps of its last phase
TAIL_OVERRUN = 0.5  # a tail taking longer than counted: at least this share of its time so far to go
MIN_LEFT_S = 1.0  # the least an ETA says while the run runs: never 0 while work remains


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

    - A phase's pace is measured from its first *completed* step on: the time before it (the first
      generation, a step-0 eval, compilation) is not a step's cost.
    - The pace is a recency-weighted mean over the whole phase (a step's weight halves every
      ``HALF_LIFE`` steps), not the last few steps: on a busy machine a step's time swings 10x
      from one second to the next, and each swing multiplied the steps still to come.
    - A phase not timed yet counts at the cost model's estimate (see the module), and the ETA says
      it is one; that estimate stays in the pace as ``PRIOR_STEPS`` steps' worth of evidence, which
      the phase's own steps outweigh as they come.
    - The ETA shown moves with the clock; beyond that it moves at most ``SWING`` x per 10 s (new
      steps are the only new evidence, and one burst or stall is not a new pace).
    - After the last step the run still evaluates and saves: that tail is counted (``TAIL_STEPS``
      of a step), and while it runs the ETA counts down, and up if it overruns, never to 0.
    The time between phases (building the GRPO trainer) is not counted."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._phase: tuple[str, int] | None = None  # the phase and the step it was first seen at
        self._origin: tuple[float, int] | None = None  # when its first step completed, and which
        # per phase: (step reached, seconds, steps) of each stretch between two steps first seen
        self._stretches: dict[str, list[tuple[int, float, int]]] = {}
        self._since: tuple[str, float] | None = None  # the phase shown and when it was first seen
        self._seen: tuple[float, int] | None = None  # when the current step was first seen, and it
        self._last_mark: tuple[float, int] | None = None  # the latest step timed in this phase
        self._shown: tuple[float, float] | None = None  # (when, seconds) of the last ETA given
        self._tail_from: float | None = None  # when the run's last step was first seen done

    def waited(self, p: Progress) -> float:
        """Seconds since the phase ``p`` shows was first seen (a waiting line's counter)."""
        now = self.clock()
        if self._since is None or self._since[0] != p.phase:
            self._since = (p.phase, now)
        return now - self._since[1]

    def measured(self, phase: str) -> float | None:
        """``phase``'s own pace: its stretches' seconds over their steps, each weighted by recency."""
        stretches = self._stretches.get(phase)
        if not stretches:
            return None
        latest = stretches[-1][0]
        weights = [0.5 ** ((latest - end) / HALF_LIFE) for end, _, _ in stretches]
        seconds = sum(w * s for w, (_, s, _) in zip(weights, stretches, strict=True))
        steps = sum(w * n for w, (_, _, n) in zip(weights, stretches, strict=True))
        return seconds / steps

    def pace(self, phase: str, ratio: float) -> tuple[float, bool] | None:
        """Seconds per step of ``phase`` and whether it is an estimate (no step of it timed yet):
        its own steps' pace, with the cost model's conversion from another timed phase (``ratio``:
        GRPO step / warm-up step) as ``PRIOR_STEPS`` steps of evidence."""
        cost = {SFT_WARMUP: 1.0, TRAINING: ratio}
        prior = None
        for timed in self._stretches:
            if timed != phase and timed in cost and phase in cost:
                known = self.measured(timed)
                prior = None if known is None else known * cost[phase] / cost[timed]
        own = self.measured(phase)
        if own is not None:
            if prior is None:
                return own, False
            steps = sum(n for _, _, n in self._stretches[phase])
            return (prior * PRIOR_STEPS + own * steps) / (PRIOR_STEPS + steps), False
        if prior is not None:
            return prior, True
        others = [m for m in map(self.measured, self._stretches) if m is not None]
        return (others[-1], True) if others else None  # a phase the model does not know

    def eta(self, p: Progress) -> Eta | None:
        if p.state != RUNNING:
            return None
        now = self.clock()
        raw = self._raw(p, now)
        if raw is None:
            return None
        seconds, estimated, whole = raw
        return Eta(self._steady(seconds, now), estimated, whole)

    def _raw(self, p: Progress, now: float) -> tuple[float, bool, bool] | None:
        """(seconds left, estimated, whole run) as the evidence says now, before steadying."""
        left = 0.0
        estimated = False
        last = None  # the pace of the run's last stepped phase: the tail is counted in its steps
        if p.counting:
            self._measure(p, now)
            known = self.pace(p.phase, p.grpo_per_sft)
            if known is None:
                return None
            pace, estimated = known
            last = pace
            assert self._seen is not None
            # the next step has been running at least this long (status.json is written about once
            # a second, so a step first seen now may have ended up to a second ago)
            in_step = max(0.0, now - self._seen[0] - STATUS_LAG_S)
            if estimated:  # this phase is not timed: its step takes at least what this one has taken
                pace = max(pace, in_step)
            elif in_step > pace:  # a slow step: let it weigh in as one more step of evidence
                n = max(1, sum(k for _, _, k in self._stretches.get(p.phase, [])))
                pace = (pace * n + in_step) / (n + 1)
            if p.step >= (p.total or 0) and not p.ahead:  # the run's every step done: its tail
                return self._tail(pace, now), estimated, False
            self._tail_from = None
            left = max(0.0, ((p.total or 0) - p.step) * pace - min(pace, in_step))
        elif not p.ahead and p.phase in (SAVING, DONE) and self._stretches:
            # after the last step (the final save): the tail, counted down from the last step
            known = self.pace(TRAINING, p.grpo_per_sft) or self.pace(SFT_WARMUP, 1.0)
            return (self._tail(known[0], now), known[1], False) if known else None
        for phase, steps in p.ahead:
            known = self.pace(phase, p.grpo_per_sft)
            if known is None:
                return None
            left += steps * known[0]
            last = known[0]
            estimated = estimated or known[1]
        if not p.counting and not p.ahead:
            return None
        assert last is not None
        return left + self._tail_cost(last), estimated, bool(p.ahead)

    @staticmethod
    def _tail_cost(pace: float) -> float:
        """What the run does after its last step (a final eval, the save), in steps of its pace."""
        return TAIL_STEPS * pace

    def _tail(self, pace: float, now: float) -> float:
        """Seconds left in the tail: its cost less the time it has run; one that takes longer than
        that has at least half its time so far to go, never 0 while the run runs."""
        if self._tail_from is None:
            self._tail_from = now
        ran = now - self._tail_from
        return max(self._tail_cost(pace) - ran, TAIL_OVERRUN * ran, MIN_LEFT_S)

    def _steady(self, seconds: float, now: float) -> float:
        """The ETA to show: the last one counted down by the time since, moved toward ``seconds``
        by at most ``SWING`` x per 10 s."""
        if self._shown is not None:
            when, shown = self._shown
            dt = max(0.0, now - when)
            expected = max(shown - dt, MIN_LEFT_S)
            give = SWING ** (dt / 10.0)
            # up: as from 10 s at least (a tail that overruns grows from the 1 s floor)
            seconds = min(max(seconds, expected / give), max(expected, SWING_FLOOR_S) * give)
        seconds = max(seconds, MIN_LEFT_S)
        self._shown = (now, seconds)
        return seconds

    def _measure(self, p: Progress, now: float) -> float | None:
        """This phase's pace (and remember it), or None before two of its steps completed.

        Measured when a new step is first seen, not at every look: status.json is written about
        once a second, so a step seen again 0.5 s later has not taken 0.5 s longer."""
        if self._seen is None or self._seen[1] != p.step:
            self._seen = (now, p.step)
        if self._phase is None or self._phase[0] != p.phase or p.step < self._phase[1]:
            self._phase, self._origin, self._last_mark = (p.phase, p.step), None, None
            return self.measured(p.phase) if p.step > 0 else None
        if self._origin is None:
            if p.step > self._phase[1]:
                self._origin = self._last_mark = (now, p.step)
            return None
        seen_at, step = self._seen
        assert self._last_mark is not None
        if step > self._last_mark[1] and seen_at > self._last_mark[0]:
            t0, s0 = self._last_mark
            seconds, known = seen_at - t0, self.pace(p.phase, p.grpo_per_sft)
            if known is not None:  # one stall is not a new pace: it counts at most STALL_CAP steps
                seconds = min(seconds, STALL_CAP * known[0] * (step - s0))
            self._stretches.setdefault(p.phase, []).append((step, seconds, step - s0))
            self._last_mark = (seen_at, step)
        return self.measured(p.phase)


__all__ = [
    "DEFAULT_GRPO_PER_SFT",
    "GRPO_COST_PER_ROLLOUT_TOKEN",
    "Eta",
    "EtaClock",
    "duration",
    "grpo_per_sft",
]
