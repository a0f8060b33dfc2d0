"""Following a run from a terminal: one progress line per logging step, throttled."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from primenb.protocol.documents import StatusDoc, typed
from primenb.protocol.rundir import FINAL_STATES, SFT_WARMUP, State, metric_row
from primenb.protocol.tail import JsonlTail
from primenb.render.summary import headline

if TYPE_CHECKING:
    from primenb.run import Run


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)[:40]


def follow(run: Run, *, every: float = 2.0, stop_on_interrupt: bool = False, grace_s: float = 3.0) -> int:
    """Print a progress line per new metrics row (at most one per `every` s) until the run ends.

    Ctrl-C detaches the viewer and leaves the run training; a second Ctrl-C within ``grace_s``
    seconds (or ``stop_on_interrupt``, `primenb attach --stop`) asks the run to checkpoint and stop."""
    warned: set[str] = set()  # the warnings printed so far: each once
    try:
        return _follow(run, every, warned)
    except KeyboardInterrupt:
        if not stop_on_interrupt:
            print(
                f"\ndetached from {run.name}; it keeps training (primenb attach {run.name} follows it again). "
                f"Press Ctrl-C again within {grace_s:.0f} s to stop it.",
                flush=True,
            )
            try:
                time.sleep(grace_s)
                return 0
            except KeyboardInterrupt:
                pass
        print(f"\nasking {run.name} to save a checkpoint and stop...", flush=True)
        run.stop(wait=True)
        return _report(run, warned)


def _follow(run: Run, every: float, warned: set[str]) -> int:
    tail = JsonlTail(run.files.metrics_path)
    latest: dict[str, Any] = {}  # newest value of every metric (eval rows log fewer keys)
    last_print = 0.0
    fresh = False  # a row came since the last line: a line without one would only repeat it
    last_line = ""
    while True:
        status = run.refresh()
        done = typed(StatusDoc, status).state in FINAL_STATES
        # rows read after the status: once it is final, every row the engine wrote is in
        for row in map(metric_row, tail.read_new()):
            if row is not None:
                latest.update(row)
                fresh = True
        _say_new_warnings(status, warned)
        if (fresh or done) and (done or time.monotonic() - last_print >= every):
            line = f"[{run.name}] {progress_line(status, latest)}"
            if line != last_line:  # the status can lag its rows: the final one says the last step
                print(line, flush=True)
            last_print, fresh, last_line = time.monotonic(), False, line
        if done:
            break
        time.sleep(0.5)
    return _report(run, warned)


def progress_line(status: Mapping[str, Any] | StatusDoc, latest: dict[str, Any]) -> str:
    """``step 3/4 reward=0.5``, or ``warm-up step 98/100 warmup/loss=1.2`` while the newest row is
    the SFT warm-up's: its steps count against the warm-up's total, not the RL run's."""
    h = headline(status, [latest])
    values = " ".join(f"{k}={_fmt(v)}" for k, v in h.items() if k not in ("state", "step", "max_steps"))
    if latest.get("phase") == SFT_WARMUP:
        total = typed(StatusDoc, status).warmup_steps
        return f"warm-up step {latest.get('step')}/{total or '?'} {values}"
    return f"step {h['step']}/{h['max_steps'] or '?'} {values}"


def _say_new_warnings(status: Mapping[str, Any] | StatusDoc, warned: set[str]) -> None:
    """What went wrong beside training (a tracker that failed or went offline), once each, as the
    monitor shows it: status.json ``warnings``, already redacted and bounded by the engine."""
    for text in typed(StatusDoc, status).warnings or []:
        if text not in warned:
            warned.add(text)
            print(f"warning: {text}", file=sys.stderr, flush=True)


def _report(run: Run, warned: set[str]) -> int:
    status = typed(StatusDoc, run.refresh())
    _say_new_warnings(status, warned)
    print(f"[{run.name}] {status.state}: {run.dir}", flush=True)
    if status.error:
        print(f"error: {status.error}", file=sys.stderr)
        if status.log_tail:
            print("\n".join(status.log_tail), file=sys.stderr)
    return 0 if status.state in (State.COMPLETED, State.STOPPED) else 1
