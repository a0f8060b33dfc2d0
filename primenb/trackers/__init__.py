"""Experiment trackers (W&B, trackio, MLflow, TensorBoard) fed by primenb's own metric rows.

The engine writes every scalar to ``metrics.jsonl`` first; each row then goes, unchanged, to the
trackers named in ``[primenb] report_to`` (and to W&B when ``[monitors.wandb]`` is set). One
tracker run per primenb run: the SFT warm-up of an RL run already logs its keys under
``warmup/`` (``primenb.protocol.rundir``), so both phases land in the same tracker run at the
run's own step numbers, with no step offset; each key's steps only ever increase.

Each tracker's own client is imported lazily, inside the sink that uses it, so ``%load_ext
primenb`` imports none of them. A sink that fails is dropped with a warning: training goes on.
Export (``%prime_harness export --to``) replays a trace's stored rows through the same sinks.
"""

from __future__ import annotations

from primenb.trackers.registry import KINDS, TRACKERS, open_sinks
from primenb.trackers.sinks import Fanout, TrackerSettings

__all__ = ["KINDS", "TRACKERS", "Fanout", "TrackerSettings", "open_sinks"]
