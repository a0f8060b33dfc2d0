"""The experiment trackers a run may report to, by name, declared once at the bottom of the layers.

The config schema (``[primenb] report_to``) and the commands (``export --to``) sit below
`primenb.trackers` and may not import it, so the names live here; `primenb.trackers.registry`
maps each to its sink, and a test holds the two together.
"""

from __future__ import annotations

from typing import Literal, get_args

TrackerKind = Literal["wandb", "trackio", "mlflow", "tensorboard"]
TRACKER_KINDS: tuple[str, ...] = get_args(TrackerKind)

__all__ = ["TRACKER_KINDS", "TrackerKind"]
