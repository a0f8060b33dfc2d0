"""Reward functions that survive a bad completion.

`guard(func, env_id)` wraps a reward function (TRL signature
``f(prompts, completions, **columns) -> list[float | None]``) so that:

* a completion the function raises on is **scored 0.0** (the same as a wrong answer), the
  failure is logged on the ``primenb.envs`` logger (the engine writes it to ``logs/engine.log``)
  and counted on the wrapper (``failed`` / ``scored``); the other completions of the batch
  keep their scores and the run goes on. When the whole batch raises, the completions are
  scored again one at a time to find which ones fail.
* a score that is not a number, or is NaN/infinite, counts as a failure too (0.0, logged).
  ``None`` stays ``None`` (TRL's "this function does not apply to this row").
* a function that breaks its contract for a whole batch (returns something that is not a list,
  or the wrong number of scores) raises `RewardFunctionError` naming the environment and the
  function: that is a bug in the function, not a bad completion, and the run stops.
* a function with the attribute ``stop_run_on_error = True`` is not guarded: any exception it
  raises stops the run (for a scoring service that went away, where training on zeros would
  waste the run).

A function can report per-completion failures itself by raising `PartialScores` with the
scores it has and the errors by index (the verifiers adapter does this).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from primenb.envs.errors import RewardFunctionError
from primenb.protocol.privacy import error_text, is_private

log = logging.getLogger("primenb.envs")

FAILED_SCORE = 0.0
LOG_FIRST_BATCHES = 20  # failing batches logged one by one, then a summary every LOG_EVERY
LOG_EVERY = 100


class PartialScores(Exception):
    """Raised by a reward function that scored some completions and failed on others."""

    def __init__(self, values: Sequence[float | None], errors: dict[int, BaseException]) -> None:
        super().__init__(f"{len(errors)} of {len(values)} completions failed")
        self.values = list(values)
        self.errors = dict(errors)


class GuardedReward:
    """A reward function wrapped by `guard`; keeps the wrapped function's name and docstring."""

    def __init__(self, func: Callable[..., Any], env_id: str) -> None:
        self.__wrapped__ = func
        self.__name__ = getattr(func, "__name__", "reward")
        self.__qualname__ = self.__name__
        self.__doc__ = getattr(func, "__doc__", None)
        self.env_id = env_id
        self.scored = 0
        self.failed = 0
        self.failing_batches = 0
        self.last_error: BaseException | None = None  # the latest failure, for the engine's report

    def __repr__(self) -> str:
        return f"<reward {self.__name__} of {self.env_id!r}: {self.failed}/{self.scored} failed>"

    def __call__(self, prompts: list[Any], completions: list[Any], **columns: Any) -> list[float | None]:
        n = len(completions)
        errors: dict[int, BaseException] = {}
        try:
            raw = self.__wrapped__(prompts=prompts, completions=completions, **columns)
        except PartialScores as partial:
            raw, errors = partial.values, dict(partial.errors)
        except Exception as exc:
            raw, errors = self._one_by_one(prompts, completions, columns, exc)
        values = self._check(raw, n)
        for i, value in enumerate(values):
            if i in errors:
                values[i] = FAILED_SCORE
            elif isinstance(value, _Unscorable):
                errors[i] = value.error
                values[i] = FAILED_SCORE
        self.scored += n
        if errors:
            self.last_error = next(iter(errors.values()))
            self.failed += len(errors)
            self.failing_batches += 1
            self._log(errors, n)
        return values

    # -- internals ------------------------------------------------------------------------------
    def _one_by_one(
        self, prompts: list[Any], completions: list[Any], columns: dict[str, Any], batch_exc: Exception
    ) -> tuple[list[Any], dict[int, BaseException]]:
        n = len(completions)
        if n <= 1:
            return [FAILED_SCORE] * n, dict.fromkeys(range(n), batch_exc)
        values: list[Any] = []
        errors: dict[int, BaseException] = {}
        for i in range(n):
            one = {k: [v[i]] if _is_column(v, n) else v for k, v in columns.items()}
            try:
                out = self.__wrapped__(prompts=[prompts[i]], completions=[completions[i]], **one)
                (value,) = out
            except PartialScores as partial:
                value = FAILED_SCORE
                errors[i] = next(iter(partial.errors.values()), batch_exc)
            except Exception as exc:
                value = FAILED_SCORE
                errors[i] = exc
            values.append(value)
        return values, errors

    def _check(self, raw: Any, n: int) -> list[Any]:
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
            try:
                raw = list(raw)
            except Exception:  # not iterable, or an iterator that raises: the function's contract
                raise RewardFunctionError(
                    f"environment {self.env_id!r}: reward function {self.__name__!r} returned "
                    f"{type(raw).__name__}, not a list of {n} scores"
                ) from None
        if len(raw) != n:
            raise RewardFunctionError(
                f"environment {self.env_id!r}: reward function {self.__name__!r} returned "
                f"{len(raw)} scores for {n} completions; it must return one score per completion"
            )
        return [to_score(value) for value in raw]

    def _log(self, errors: dict[int, BaseException], n: int) -> None:
        first = next(iter(errors.values()))
        what = error_text(first)[:300]  # the type only under data_collection = "deny": messages quote data
        if self.failing_batches <= LOG_FIRST_BATCHES:
            log.warning(
                "environment %r, reward function %r: failed on %d of %d completions (scored %.1f): %s",
                self.env_id,
                self.__name__,
                len(errors),
                n,
                FAILED_SCORE,
                what,
                # a traceback prints the message: under deny only the type (in `what`) is shown
                exc_info=first if self.failing_batches == 1 and not is_private() else None,
            )
            if self.failing_batches == LOG_FIRST_BATCHES:
                log.warning(
                    "environment %r, reward function %r: further failures are summarised every %d failing batches",
                    self.env_id,
                    self.__name__,
                    LOG_EVERY,
                )
        elif self.failing_batches % LOG_EVERY == 0:
            log.warning(
                "environment %r, reward function %r: %d of %d completions failed so far (latest: %s)",
                self.env_id,
                self.__name__,
                self.failed,
                self.scored,
                what,
            )


class _Unscorable:
    """A returned value that is not a finite score, with why (counted as a failure)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def to_score(value: Any) -> float | _Unscorable | None:
    """One returned value as a score: ``None`` stays ``None``; anything ``float()`` turns into a
    finite number is that number; everything else (``10**400`` overflows, ``nan``, a string, an
    object whose ``__float__`` raises *anything*) is unscorable. This is the only conversion, so
    no returned value can escape the guard."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, bytearray)):  # float() would parse text: "5" is not a score
        return _Unscorable(ValueError(f"returned a {type(value).__name__}, not a number (parse the text first)"))
    try:
        number = float(value)
    except Exception as exc:  # any __float__/__index__ error is the function's, not the run's
        return _Unscorable(ValueError(f"returned a {type(value).__name__} that is not a number ({error_text(exc)})"))
    if not isinstance(number, float) or not math.isfinite(number):
        return _Unscorable(ValueError(f"returned {number!r}, not a finite number"))
    return number


def checked_score(value: Any) -> float | None:
    """`to_score` where an unscorable value is raised (its reason as ValueError), not counted."""
    score = to_score(value)
    if isinstance(score, _Unscorable):
        raise score.error
    return score


def _is_column(value: Any, n: int) -> bool:
    return isinstance(value, list) and len(value) == n


def guard(func: Callable[..., Any], env_id: str) -> Callable[..., Any]:
    """``func`` wrapped as described in the module docstring (returned as is when it is already
    guarded or asks to stop the run on errors)."""
    if isinstance(func, GuardedReward) or getattr(func, "stop_run_on_error", False):
        return func
    return GuardedReward(func, env_id)


# -- weighted totals ---------------------------------------------------------------------------
# Each score is finite (`to_score`), but a weighted sum of finite scores need not be: two functions
# returning 1e308 sum to inf, and inf - inf is NaN (a reward mean of inf, a NaN advantage). The
# decision: keep every total finite by clamping each weighted term to +-MAX_TERM, with a warning
# that names the environment. Values that large carry no information a mean could use; refusing
# them would stop an eval or a run over one absurd function, where a clamp keeps the ordering.
MAX_TERM = 1e290  # any realistic count of terms sums far below the float range


class RewardTotalWarning(UserWarning):
    """A weighted reward term was beyond +-MAX_TERM (or not finite) and was clamped."""


def bounded_term(weight: float, value: float) -> tuple[float, bool]:
    """``weight * value`` kept within +-`MAX_TERM`; True when it had to be clamped."""
    term = float(weight) * float(value)
    if math.isnan(term):  # 0 * inf cannot happen for finite scores; a NaN weight is refused earlier
        return 0.0, True
    if abs(term) > MAX_TERM:
        return math.copysign(MAX_TERM, term), True
    return term, False


def weighted_total(terms: Any, env_id: str = "") -> float:
    """The weighted sum of ``(weight, value)`` pairs, always finite (`bounded_term`); a clamp is
    reported once per call as a `RewardTotalWarning` naming ``env_id``."""
    import warnings

    total, clamped = 0.0, False
    for weight, value in terms:
        term, was = bounded_term(weight, value)
        total += term
        clamped = clamped or was
    if clamped:
        warnings.warn(
            f"environment {env_id[:200]!r}: a weighted reward was beyond +-{MAX_TERM:g} and was clamped to it "
            "(scores that large cannot be summed or averaged); scale the reward functions down",
            RewardTotalWarning,
            stacklevel=3,
        )
    return total


__all__ = [
    "FAILED_SCORE",
    "MAX_TERM",
    "GuardedReward",
    "PartialScores",
    "RewardTotalWarning",
    "bounded_term",
    "checked_score",
    "guard",
    "to_score",
    "weighted_total",
]
