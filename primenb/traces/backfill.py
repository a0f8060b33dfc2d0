"""`%prime_harness export TRACE --to TRACKER` (`primenb.trackers.registry`): replay a past trace's
stored metric rows through the same tracker sinks a live run uses (primenb.trackers), so a run
made before trackers existed, or with them off, gets the same curves, the same keys (the final
eval as ``final/eval/...``, from the last eval row) and the run's own final state.

Exporting a run that a tracker already holds (reported live, or exported before) is refused with a
message naming where it is: a second copy would show every point twice, and replacing would delete
what the user did with the first one in that tool (notes, tags, comparisons; a synced W&B run).

The replay runs in a child process: each tracker's client keeps process-wide state (trackio binds
its store folder at its first import, W&B its current run, MLflow the retry settings primenb
sets), so a kernel that exported one trace would send the next one to the same place, and the
user's own use of those libraries in the kernel would inherit primenb's settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol import metrics
from primenb.protocol.hashing import redact, redact_text
from primenb.protocol.privacy import error_text
from primenb.traces.trace import get
from primenb.trackers import KINDS, TrackerSettings, open_sinks
from primenb.trackers.sinks import ENDINGS, records_hostname

ANSWER = "primenb-backfill: "  # the child's one line of result on stdout


def backfill(ref: Any, kind: str, *, timeout: float = 900) -> dict[str, str]:
    """Send ``ref``'s metrics to tracker ``kind``; returns where the tracker run lives."""
    if kind not in KINDS:
        raise PrimenbError(f"unknown tracker {kind!r}: use one of {', '.join(KINDS)}")
    trace = get(ref)
    cmd = [sys.executable, "-m", "primenb.traces.backfill", str(trace.run_dir), kind]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        raise PrimenbError(f"export to {kind} did not finish in {timeout:.0f} s; is the tracker reachable?") from exc
    lines = [line for line in proc.stdout.splitlines() if line.startswith(ANSWER)]
    try:
        answer = json.loads(lines[-1].removeprefix(ANSWER)) if lines else {}
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or ("where" not in answer and "error" not in answer):
        tail = redact_text(" ".join(proc.stderr.split()[-60:]))
        raise PrimenbError(f"export to {kind} failed (exit {proc.returncode}): {tail[-600:]}")
    if "error" in answer:
        raise PrimenbError(str(answer["error"]))
    where = answer["where"]
    return {str(k): redact_text(str(v)) for k, v in where.items()} if isinstance(where, dict) else {}


def _send(ref: Any, kind: str) -> dict[str, str]:
    """The replay itself (in the child process)."""
    trace = get(ref)
    config = trace.config
    monitors = config.get("monitors")
    wandb = monitors.get("wandb") if isinstance(monitors, dict) else None
    wandb = wandb if isinstance(wandb, dict) else None
    settings = TrackerSettings(
        root=trace.files.trackers_dir,
        name=trace.name,
        trace_id=trace.id,
        trace_path=str(trace.run_dir),
        config=redact(config),  # the trace's config is redacted already; scanned again all the same
        wandb=redact(wandb) if wandb else None,
        export=True,
        record_hostname=records_hostname(config),
        store=_store_for(trace, kind),
    )
    fan = open_sinks([kind], settings)
    if not fan.sinks:
        raise PrimenbError("; ".join(fan.warnings) or f"tracker {kind} did not start")
    rows = trace.metric_rows()
    for row in rows:
        fan.log_row(row)
    state = str(trace.state) if trace.state in ENDINGS else "completed"
    where = fan.finish(last_eval(rows), state)
    if fan.warnings:
        raise PrimenbError("; ".join(fan.warnings))
    return where.get(kind, {})


def _store_for(trace: Any, kind: str) -> Path | None:
    """Where an export's trackio / MLflow store goes by default: where the run's live reporting
    put it when that was its own folder (so a second copy is seen and refused), else the store
    shared by the runs of this PRIME_HOME, as a local run's."""
    from primenb.home import prime_home

    own = trace.files.trackers_dir / kind
    return None if own.exists() else prime_home()


def last_eval(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The last eval's ``eval/...`` values: what a live run hands its trackers as the final eval
    (the warm-up's ``warmup/eval/...`` rows are not it)."""
    for row in reversed(rows):
        found = {k: v for k, v in row.items() if metrics.is_eval_key(k)}
        if found:
            return found
    return {}


def main(argv: list[str]) -> int:
    run_dir, kind = argv
    try:
        answer: dict[str, Any] = {"where": _send(run_dir, kind)}
    except PrimenbError as exc:
        answer = {"error": str(exc)}
    except Exception as exc:
        answer = {"error": f"export to {kind} failed ({error_text(exc)})"}
    print(ANSWER + json.dumps(answer), flush=True)  # trackers' clients print too, even at exit
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
