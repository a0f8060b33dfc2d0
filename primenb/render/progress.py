"""Following a run from a terminal: one progress line per logging step, throttled."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

from primenb.protocol.rundir import FINAL_STATES
from primenb.protocol.tail import JsonlTail
from primenb.render.summary import headline

if TYPE_CHECKING:
    from primenb.run import Run


def follow(run: Run, *, every: float = 2.0) -> int:
    """Print a progress line per new metrics row (at most one per `every` s) until the run ends."""
    tail = JsonlTail(run.files.metrics_path)
    latest: dict[str, Any] = {}  # newest value of every metric (eval rows log fewer keys)
    last_print = 0.0
    try:
        while True:
            for row in tail.read_new():
                latest.update(row)
            status = run.refresh()
            done = status.get("state") in FINAL_STATES
            if latest and (done or time.monotonic() - last_print >= every):
                h = headline(status, [latest])
                values = " ".join(f"{k}={v:.4g}" for k, v in h.items() if k not in ("state", "step", "max_steps"))
                print(f"[{run.name}] step {h['step']}/{h['max_steps'] or '?'} {values}", flush=True)
                last_print = time.monotonic()
            if done:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        print(f"\ninterrupted: asking {run.name} to save a checkpoint and stop...", flush=True)
        run.stop(wait=True)
    status = run.refresh()
    print(f"[{run.name}] {status.get('state')}: {run.dir}", flush=True)
    if status.get("error"):
        print(f"error: {status['error']}", file=sys.stderr)
        tail_text = status.get("log_tail")
        if tail_text:
            print("\n".join(tail_text) if isinstance(tail_text, list) else tail_text, file=sys.stderr)
    return 0 if status.get("state") in ("completed", "stopped") else 1
