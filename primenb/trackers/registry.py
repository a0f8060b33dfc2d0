"""Every experiment tracker, declared once: ``TRACKERS = {kind: sink class}``.

Read from here, never listed again: `open_sinks` (a live run's and an export's), the kinds an
export may name (`KINDS`). Its names are `primenb.tracker_kinds.TRACKER_KINDS`, which the config
schema (``[primenb] report_to``) and the commands (``export --to``) read below this layer; a test
holds the two together. Adding a tracker is a `Sink` subclass, its entry here and its name there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from primenb.trackers.sinks import (
    AlreadyHeld,
    Fanout,
    MlflowSink,
    Sink,
    TensorBoardSink,
    TrackerSettings,
    TrackioSink,
    WandbSink,
    _why,
)

log = logging.getLogger("primenb.trackers")

# a callable that opens its run from the settings: `Sink` itself declares no constructor
TRACKERS: dict[str, Callable[[TrackerSettings], Sink]] = {
    cls.kind: cls for cls in (WandbSink, TrackioSink, MlflowSink, TensorBoardSink)
}
KINDS = tuple(TRACKERS)


def open_sinks(kinds: list[str], settings: TrackerSettings) -> Fanout:
    """Open one sink per kind (unknown kinds are refused by the config schema before this)."""
    sinks: list[Sink] = []
    warnings: list[str] = []
    failed: dict[str, str] = {}
    for kind in dict.fromkeys(kinds):
        msg = ""
        try:
            settings.root.mkdir(parents=True, exist_ok=True)  # each sink's own failure if it cannot be
            sink = TRACKERS[kind](settings)
            sinks.append(sink)
            if sink.note:
                log.warning("%s", sink.note)
                warnings.append(sink.note)
        except AlreadyHeld as exc:
            msg = f"tracker {kind}: {exc}"
        except ImportError as exc:
            msg = f"tracker {kind}: not installed ({exc.name}); install primenb[trackers]"
        except Exception as exc:
            msg = f"tracker {kind}: could not start ({_why(exc)}); the run goes on without it"
        if msg:
            log.warning("%s", msg)
            warnings.append(msg)
            failed[kind] = msg
    return Fanout(sinks, warnings, failed)


__all__ = ["KINDS", "TRACKERS", "open_sinks"]
