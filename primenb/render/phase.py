"""What a run is doing now, in words and numbers: the phase line, the bar and its ETA.

Pure functions of ``status.json`` (and a clock), shared by the live monitor and the static views.
Runs written before ``phase_step``/``phase_total`` existed fall back to ``step``/``max_steps``
(and ``warmup_step``/``warmup_steps`` during a warm-up).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from primenb.protocol.documents import StatusDoc, typed
from primenb.protocol.rundir import (
    BUILDING_MODEL,
    BUILDING_TRAINER,
    DONE,
    FINAL_STATES,
    IMPORTING,
    QUEUED,
    SAVING,
    SFT_WARMUP,
    STARTING,
    TRAINING,
    State,
)
from primenb.render.eta import Eta, EtaClock, duration, grpo_per_sft

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

    state: State
    phase: str
    label: str
    step: int
    total: int | None
    then: str = ""  # what follows this phase ("then training (GRPO): 30 steps"), when known
    # the steps still to come in the stepped phases *other* than this one, in order: what a
    # whole-run ETA adds to this phase's own remaining steps
    ahead: tuple[tuple[str, int], ...] = ()
    # what a GRPO step costs in warm-up steps, from the plan (`primenb.render.eta`)
    grpo_per_sft: float = 1.0

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


def _ended_in_warmup(status: StatusDoc) -> bool:
    """Whether a run ended during its SFT warm-up: no main step, the warm-up's steps not all done."""
    warm, done = _int(status.warmup_steps), _int(status.warmup_step)
    return not _int(status.step) and warm > 0 and done < warm


def progress(status: Mapping[str, Any] | StatusDoc) -> Progress:
    """Where the run of ``status`` (status.json, read or as recorded) stands."""
    doc = typed(StatusDoc, status)
    # no state yet: the launcher has not written status.json; a value this primenb does not know: UNKNOWN
    recorded = doc.state or (State.UNKNOWN if isinstance(status, Mapping) and status.get("state") else None)
    state = recorded or QUEUED
    phase = str(doc.phase or (TRAINING if _int(doc.step) else STARTING))
    if state == QUEUED:
        phase = QUEUED
    mode = doc.mode
    then = ""
    main_left = max(0, _int(doc.max_steps) - _int(doc.step))
    ahead: tuple[tuple[str, int], ...] = ()
    if state in FINAL_STATES and _ended_in_warmup(doc):
        # stopped (or failed) before the main phase trained a step: where the warm-up was
        label = "SFT warm-up"
        step = _int(doc.warmup_step)
        total: int | None = _int(doc.warmup_steps)
        phase = SFT_WARMUP
        then = f"{MAIN_LABEL.get(str(mode), 'training')} did not start"
    elif phase == SFT_WARMUP:
        label = "SFT warm-up"
        step = _int(doc.phase_step, _int(doc.warmup_step))
        total = _int(doc.phase_total, _int(doc.warmup_steps)) or None
        main = _int(doc.max_steps)
        if main:  # the warm-up is not the whole run: say what still comes after it
            then = f"then {MAIN_LABEL.get(str(mode), 'training')}: {main} steps"
            ahead = ((TRAINING, main_left),)
    elif phase in (TRAINING, DONE) or state in FINAL_STATES:
        label = MAIN_LABEL.get(str(mode), "training")
        step = _int(doc.step)
        total = _int(doc.max_steps) or None
        phase = TRAINING if phase == DONE or state in FINAL_STATES else phase
    else:
        label = WAITING_TEXT.get(phase, f"{phase}…")
        step, total = 0, None
        # between steps (building the trainer after the warm-up, saving a checkpoint): what is left
        warm_left = max(0, _int(doc.warmup_steps) - _int(doc.warmup_step))
        ahead = tuple((name, n) for name, n in ((SFT_WARMUP, warm_left), (TRAINING, main_left)) if n)
    return Progress(state, phase, label, step, total, then, ahead, grpo_per_sft(doc.step_plan))


def phase_line(p: Progress, eta: Eta | float | None = None, waited: float | None = None) -> str:
    """``SFT warm-up · step 12/40 · ETA ~1m08s for the whole run · then training (GRPO): 30 steps``
    or ``building the model… (12s)``: one line, plain text. ``waited``: seconds in a phase that
    counts no steps (a line that ticks says the engine is alive)."""
    if p.state in FINAL_STATES:
        where = f" in the {p.label}" if p.phase == SFT_WARMUP else ""
        return f"{p.state}{where} at step {p.step}/{p.total or '?'}" + (f" · {p.then}" if p.then else "")
    if isinstance(eta, (int, float)):
        eta = Eta(float(eta))
    if not p.counting:
        text = p.label + (f" ({duration(waited)})" if waited is not None and waited >= 1 else "")
        return text + (f" · {eta}" if eta is not None else "")
    text = f"{p.label} · step {p.step}/{p.total}"
    text += f" · {eta}" if eta is not None else ""
    return text + (f" · {p.then}" if p.then else "")


def replay(recording: Mapping[str, Any], poll: float = 0.5) -> list[tuple[float, Progress, Eta | None]]:
    """The monitor's view of a recorded run: (time, progress, ETA) every ``poll`` seconds.

    ``recording``: ``{"end": seconds, "status": [[t, status.json], ...], "step_plan": {...}}``
    (`bench/record_eta.py` writes them; ``step_plan`` fills in for runs recorded before
    status.json carried it)."""
    now = [0.0]
    clock = EtaClock(lambda: now[0])
    snaps, out, i, t = recording["status"], [], 0, 0.0
    plan = {"step_plan": recording["step_plan"]} if recording.get("step_plan") else {}
    while t < recording["end"]:
        while i + 1 < len(snaps) and snaps[i + 1][0] <= t:
            i += 1
        now[0] = t
        p = progress({**plan, **snaps[i][1]})
        out.append((t, p, clock.eta(p)))
        t += poll
    return out


@dataclass(frozen=True)
class ReplayScore:
    """How a recorded run's ETAs compared with the time actually left, from ``start`` of the run on
    (readings with an ETA and more than 3 s left): ``share`` within ``tolerance`` of the truth,
    ``worst`` shown / true, and ``swings``: readings 10 s apart whose ETAs differ by more than 2x,
    and by 2x more than the time actually left did (a pace that really changed moves both)."""

    share: float
    worst: float
    swings: int
    readings: int


def replay_score(recording: Mapping[str, Any], start: float = 0.1, tolerance: float = 0.3) -> ReplayScore:
    end = float(recording["end"])
    shown = {
        round(t * 2): (t, eta.seconds)
        for t, _, eta in replay(recording)
        if eta is not None and end - t > 3.0 and t >= start * end
    }
    ratios = [seconds / (end - t) for t, seconds in shown.values()]
    swings = 0
    for k, (t, seconds) in shown.items():
        later = shown.get(k + 20)  # 10 s on, at the 0.5 s refresh
        if later is not None:  # 2x apart, and 2x beyond how the time actually left moved
            shown_moved = max(later[1], 0.5) / max(seconds, 0.5)  # an ETA of 0 s counts as 0.5 s
            beyond = shown_moved / ((end - later[0]) / (end - t))
            swings += not 0.5 <= shown_moved <= 2.0 and not 0.5 <= beyond <= 2.0
    return ReplayScore(
        share=sum(abs(r - 1.0) <= tolerance for r in ratios) / len(ratios) if ratios else 0.0,
        worst=max(ratios, key=lambda r: abs(r - 1.0)) if ratios else float("nan"),
        swings=swings,
        readings=len(ratios),
    )


__all__ = [
    "WAITING_TEXT",
    "Eta",
    "EtaClock",
    "Progress",
    "ReplayScore",
    "duration",
    "phase_line",
    "progress",
    "replay",
    "replay_score",
]
