"""The whole-run ETA's error over time, on recorded real runs.

    python bench/eta_replay.py

Replays every recording (tests/notebook/data/eta_timings.json, and bench/results/eta_recordings.json
when `bench/record_eta.py` wrote one) through the monitor's ETA clock at its 0.5 s refresh and
prints, at each tenth of the run, the ETA shown divided by the time actually left (1.00 is exact;
"-": no ETA yet, the engine was still starting), then, from 10 % of the run on: the worst error,
the share of readings within 30 % of the truth, and the swings: readings 10 s apart whose ETAs
differ by more than 2x, and by 2x more than the time actually left did. Issue 45's target: within 30 % at
80 % of the readings, and no swing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from primenb.render.phase import replay, replay_score

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    ROOT / "tests" / "notebook" / "data" / "eta_timings.json",
    ROOT / "bench" / "results" / "eta_recordings.json",
)


def recordings() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in SOURCES:
        if path.exists():
            found.update(json.loads(path.read_text()))
    return found


def errors(recording: dict[str, Any]) -> list[tuple[float, str, float]]:
    """(fraction of the run, phase, ETA / time left) for every view with an ETA and > 3 s left."""
    end = recording["end"]
    return [
        (t / end, p.phase, eta.seconds / (end - t))
        for t, p, eta in replay(recording)
        if eta is not None and end - t > 3.0
    ]


def main() -> None:
    tenths = [i / 10 for i in range(1, 10)]
    head = " ".join(f"{int(f * 100):>5}%" for f in tenths)
    print(f"{'recording':<28} {head}   worst from 10%   in 30%  swings")
    for name, recording in recordings().items():
        seen = errors(recording)
        cells = []
        for f in tenths:
            near = [r for at, _, r in seen if abs(at - f) < 0.05]
            cells.append(f"{near[0]:>6.2f}" if near else f"{'-':>6}")
        score = replay_score(recording)
        print(f"{name:<28} " + " ".join(cells) + f"   {score.worst:>10.2f}      {score.share:>5.0%}  {score.swings:>6}")


if __name__ == "__main__":
    main()
