"""The numbers an eval reports, computed as a statistician would: rollouts are samples drawn with
recorded seeds, the unit of independence is the example (its rollouts share a prompt), so the
interval is over per-example means, and ``-r`` > 1 adds pass@k (Chen et al. 2021's unbiased
estimator)."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import defaultdict
from typing import Any

Z95 = 1.96


def rollout_seed(base: int, example: int, rollout: int) -> int:
    """The seed of one rollout: fixed by (eval seed, example, rollout), so it does not move when
    ``-n`` or ``-r`` change, and two evals with the same seed draw the same samples."""
    digest = hashlib.sha256(f"{base}:{example}:{rollout}".encode()).digest()
    return int.from_bytes(digest[:7], "big")


def mean(values: Any) -> float:
    """The mean, also of values whose sum overflows (1e308 twice: `fsum` raises, this does not)."""
    vals = [float(v) for v in values]
    if not vals:
        return math.nan
    try:
        return statistics.fmean(vals)
    except (OverflowError, ValueError):  # an intermediate sum past float's range, or inf - inf
        return math.fsum(v / len(vals) for v in vals) if all(map(math.isfinite, vals)) else math.nan


def stdev(values: Any) -> float:
    vals = [float(v) for v in values]
    if len(vals) < 2:
        return 0.0
    if not all(map(math.isfinite, vals)):  # statistics.stdev raises AttributeError on inf (3.11)
        return math.nan
    try:
        return statistics.stdev(vals)
    except (OverflowError, ValueError):
        return math.nan


def per_example(records: list[dict[str, Any]]) -> dict[int, list[float]]:
    rewards: dict[int, list[float]] = defaultdict(list)
    for r in records:
        rewards[int(r["example"])].append(float(r["reward"]))
    return dict(rewards)


def interval(records: list[dict[str, Any]]) -> tuple[float, float, float]:
    """Mean reward and its 95 % interval over examples (each example's mean over its rollouts)."""
    means = [mean(v) for v in per_example(records).values()]
    if not means:
        return math.nan, math.nan, math.nan
    centre = mean(means)
    if len(means) < 2:
        return centre, centre, centre
    half = Z95 * stdev(means) / math.sqrt(len(means))
    return centre, centre - half, centre + half


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of ``k`` of the ``n`` rollouts passes, ``c`` of them passing."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_ks(rollouts: int) -> list[int]:
    """1, the powers of two below ``rollouts``, and ``rollouts`` itself."""
    ks = {1, rollouts}
    k = 2
    while k < rollouts:
        ks.add(k)
        k *= 2
    return sorted(ks)


def pass_rates(records: list[dict[str, Any]], rollouts: int, threshold: float) -> dict[str, float]:
    """``pass@k`` over examples: a rollout passes when its reward reaches ``threshold``."""
    if rollouts < 2:
        return {}
    groups = per_example(records).values()
    return {
        f"pass@{k}": statistics.fmean(pass_at_k(len(v), sum(x >= threshold for x in v), k) for v in groups)
        for k in pass_ks(rollouts)
    }


__all__ = ["interval", "mean", "pass_at_k", "pass_ks", "pass_rates", "per_example", "rollout_seed", "stdev"]
