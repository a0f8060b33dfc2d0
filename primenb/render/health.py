"""Signs of trouble in a run's metrics, as sentences a person can act on.

Fed the raw ``metrics.jsonl`` rows (the engine names dropped NaN/inf values in ``nonfinite``).
Checks: no learning signal (every completion of a group got the same reward, so GRPO's advantages
are all zero: TRL logs ``frac_reward_zero_std``, older logs only ``reward_std``), a NaN/inf loss or
grad norm, an exploding grad norm, and reward functions that raise: the engine counts, per step,
``reward_calls`` (completions scored), ``reward_errors`` and ``reward_errors/<function>`` (calls
that raised, each scored 0). When failures explain a run without learning signal, the message
names the function instead of suggesting a longer warm-up.
"""

from __future__ import annotations

import statistics
from typing import Any

from primenb.protocol import metrics as M

ZERO_SIGNAL_STEPS = 3  # consecutive logged RL steps without reward variance before warning
GRAD_NORM_FACTOR = 20.0  # a grad norm this many times the run's median so far ...
GRAD_NORM_FLOOR = 100.0  # ... and above this is "exploding"
FAILURES_EXPLAIN = 0.5  # a reward function failing on this share of completions explains a flat reward


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class Health:
    """Incremental: `add` new rows as they arrive, read `messages()` at any time."""

    def __init__(self, zero_signal_steps: int = ZERO_SIGNAL_STEPS) -> None:
        self.zero_signal_steps = max(1, zero_signal_steps)
        self.zero_streak = 0
        self.zero_since: int | None = None
        self.nonfinite: dict[str, int] = {}  # metric -> first step it was NaN/inf
        self.grad_norms: list[float] = []
        self.exploded: tuple[int, float, float] | None = None  # step, value, median before
        self.reward_calls = 0  # completions scored (main phase)
        self.reward_failures: dict[str, int] = {}  # reward function -> calls that raised

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            step = row.get("step")
            if not isinstance(step, int):
                continue
            self._nonfinite(row, step)
            warm = M.is_warmup_row(row)
            self._grad_norm(_num(row.get(M.warmup(M.GRAD_NORM) if warm else M.GRAD_NORM)), step)
            if not warm:
                self._signal(row, step)
                self._reward_failures(row)

    def _reward_failures(self, row: dict[str, Any]) -> None:
        calls = _num(row.get(M.REWARD_CALLS))
        if calls is not None:
            self.reward_calls += int(calls)
        for key, value in row.items():
            count = _num(value)
            if key.startswith(M.REWARD_ERRORS_PREFIX) and count:
                name = key.removeprefix(M.REWARD_ERRORS_PREFIX)[:80]  # a user's name: kept short
                self.reward_failures[name] = self.reward_failures.get(name, 0) + int(count)

    def _nonfinite(self, row: dict[str, Any], step: int) -> None:
        names = row.get("nonfinite")
        for name in names if isinstance(names, list) else []:
            if isinstance(name, str) and M.bare(name) in (M.LOSS, M.GRAD_NORM):
                self.nonfinite.setdefault(name, step)

    def _grad_norm(self, value: float | None, step: int) -> None:
        if value is None:
            return
        if len(self.grad_norms) >= 5 and self.exploded is None:
            median = statistics.median(self.grad_norms)
            if value > GRAD_NORM_FLOOR and value > GRAD_NORM_FACTOR * max(median, 1e-8):
                self.exploded = (step, value, median)
        self.grad_norms.append(value)

    def _signal(self, row: dict[str, Any], step: int) -> None:
        frac, std = _num(row.get(M.FRAC_ZERO_STD)), _num(row.get(M.REWARD_STD))
        if frac is None and std is None:
            return  # an eval row or a foreign log: says nothing about the groups
        flat = frac >= 1.0 if frac is not None else std == 0.0
        if flat:
            self.zero_since = step if self.zero_streak == 0 else self.zero_since
            self.zero_streak += 1
        else:
            self.zero_streak, self.zero_since = 0, None

    def failing_rewards(self) -> list[str]:
        """One sentence per reward function that raised, the most failing first."""
        out = []
        for name, failed in sorted(self.reward_failures.items(), key=lambda kv: -kv[1]):
            of = f" of {self.reward_calls}" if self.reward_calls >= failed else ""
            out.append(f"reward function {name} failed on {failed}{of} completions")
        return out

    def _failures_explain(self) -> bool:
        worst = max(self.reward_failures.values(), default=0)
        return worst > 0 and (self.reward_calls == 0 or worst >= FAILURES_EXPLAIN * self.reward_calls)

    def messages(self) -> list[str]:
        out = []
        failing = self.failing_rewards()
        if failing:
            why = "; ".join(failing)
            if self.zero_streak >= self.zero_signal_steps and self._failures_explain():
                out.append(
                    f"no learning signal because {why}: a call that raises scores 0, so every completion "
                    "gets the same reward. Fix the reward function (its error is in the run's log: run.logs())."
                )
            else:
                out.append(f"{why} (a call that raises scores 0; its error is in the run's log: run.logs()).")
        if self.zero_streak >= self.zero_signal_steps and not (failing and self._failures_explain()):
            out.append(
                f"no learning signal: every completion in a group gets the same reward "
                f"(reward std 0 in every group for {self.zero_streak} logged steps, since step {self.zero_since}), "
                "so GRPO has nothing to learn from. Try a longer SFT warm-up (primenb.sft_warmup_steps), "
                "a larger group_size, a higher temperature or an easier task."
            )
        for name, step in self.nonfinite.items():
            out.append(f"{name} became NaN/inf at step {step}: training diverged; lower the learning rate.")
        if self.exploded is not None:
            step, value, median = self.exploded
            out.append(
                f"exploding gradients: grad norm {value:.3g} at step {step} (median so far {median:.3g}); "
                "lower the learning rate or clip gradients (max_norm)."
            )
        return out


def check(rows: list[dict[str, Any]], zero_signal_steps: int = ZERO_SIGNAL_STEPS) -> list[str]:
    h = Health(zero_signal_steps)
    h.add(rows)
    return h.messages()


__all__ = ["Health", "check"]
