"""The metrics a run logs, declared once: what each is called, which phase logs it, which way is
better, its unit and which views show it.

Every view reads this table instead of spelling metric names: the panels of the live monitor and
the static summary (`primenb.render.panels`), the summary's headline (`primenb.render.summary`),
the trace's curves and eval summary (`primenb.protocol.record`), the trace view's charts and
`compare`'s default metrics (`primenb.traces`), the tidy DataFrame's leading columns
(`primenb.render.tidy`), the health checks (`primenb.render.health`) and the JupyterLab sidebar's
sparkline (`SPARK_KEYS` and `HEALTH_KEYS` in the generated ``labextension/src/documents.ts``).
Adding a metric to those views is one `Metric` row.

A key is an exact name (``loss``) or a pattern with one ``<name>`` part (``eval/<env>/reward``:
one metric per eval source). The SFT warm-up of an RL run logs its metrics under the ``warmup/``
prefix (``warmup/loss``, ``warmup/eval/<env>/reward``); `match` sees through it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from primenb.protocol.documents import FINAL_LOSS, FINAL_REWARD

# phases whose metrics differ: a GRPO run, an SFT run, the SFT warm-up before GRPO
RL, SFT, WARMUP = "rl", "sft", "sft warmup"  # WARMUP: the metrics rows' (and status.json's) phase name
PHASES = (RL, SFT, WARMUP)
WARMUP_PREFIX = "warmup/"  # the warm-up's keys; also how rows written before the "phase" field say so
EVAL_PREFIX = "eval/"  # every key of an eval row (the held-out evaluation during training)

HIGHER, LOWER = "higher", "lower"  # which way is better

# where a metric is shown
MONITOR = "monitor"  # a panel of the live monitor (in each phase that logs it)
PICK = "pick"  # the monitor's last panel until a metric is picked in its search box
SUMMARY = "summary"  # a chart of the static run summary, and its headline values
SIDEBAR = "sidebar"  # the sidebar's sparkline (its main metric, in table order)
CURVE = "curve"  # summarised in trace.json (its curves, or final and best of an eval)
CHART = "chart"  # drawn in the trace view, and compared by `compare`, by default
COLUMN = "column"  # a leading column of the tidy metrics DataFrame (in table order)
HEALTH = "health"  # read by the health checks (with SIDEBAR: the sidebar's reward-failure counts)
VIEWS = (MONITOR, PICK, SUMMARY, SIDEBAR, CURVE, CHART, COLUMN, HEALTH)

# the names code reasons about one by one (written here once; the table below uses them)
REWARD, REWARD_STD, LOSS, GRAD_NORM = "reward", "reward_std", "loss", "grad_norm"
TOKEN_ACCURACY, TOKENS_PER_S = "mean_token_accuracy", "tokens/s"
EVAL_REWARD, EVAL_EXACT_MATCH, EVAL_EXAMPLES = "eval/<env>/reward", "eval/<env>/exact_match", "eval/<env>/num_examples"
FRAC_ZERO_STD = "frac_reward_zero_std"
REWARD_CALLS, REWARD_ERRORS = "reward_calls", "reward_errors"
REWARD_ERRORS_PREFIX = REWARD_ERRORS + "/"  # one count per reward function: reward_errors/<function>
REWARD_ERRORS_BY = REWARD_ERRORS_PREFIX + "<function>"


@dataclass(frozen=True)
class Metric:
    key: str  # an exact name, or a pattern with one <name> part
    label: str  # what a person reads (a chart title)
    phases: tuple[str, ...]  # the phases that log it
    direction: str | None = None  # HIGHER or LOWER is better; None: neither
    unit: str = ""
    shown: frozenset[str] = frozenset()  # VIEWS
    main: tuple[str, ...] = ()  # the phases whose main metric it is (first panel, sparkline, headline)
    aliases: tuple[str, ...] = ()  # other loggers' names for it (TRL's, a platform's)
    band: str | None = None  # the key of its spread, drawn as a band around it
    final: str | None = None  # the trace summary's field holding its last value

    @property
    def pattern(self) -> re.Pattern[str]:
        # a <name> part is anything, "/" included: an env id may be "owner/name"
        return re.compile("^" + ".+".join(re.escape(part) for part in re.split(r"<\w+>", self.key)) + "$")

    @property
    def is_pattern(self) -> bool:
        return "<" in self.key


def _shown(*views: str) -> frozenset[str]:
    return frozenset(views)


ALL = PHASES
METRICS: tuple[Metric, ...] = (
    Metric(
        REWARD,
        "train reward",
        (RL,),
        HIGHER,
        shown=_shown(MONITOR, SUMMARY, SIDEBAR, CURVE, CHART, COLUMN),
        main=(RL,),
        aliases=("rewards/mean", "train/reward", "reward/mean"),
        band=REWARD_STD,
        final=FINAL_REWARD,
    ),
    Metric(REWARD_STD, "reward std", (RL,), shown=_shown(COLUMN, HEALTH)),
    Metric(EVAL_REWARD, "eval reward", ALL, HIGHER, shown=_shown(MONITOR, SUMMARY, CURVE, CHART, COLUMN)),
    Metric(EVAL_EXACT_MATCH, "eval exact match", ALL, HIGHER, shown=_shown(CURVE, COLUMN)),
    Metric("eval/<env>/accuracy", "eval accuracy", ALL, HIGHER, shown=_shown(COLUMN)),
    Metric(EVAL_EXAMPLES, "eval examples", ALL),
    Metric(
        LOSS,
        "loss",
        ALL,
        LOWER,
        shown=_shown(MONITOR, SUMMARY, SIDEBAR, CURVE, CHART, COLUMN),
        main=(SFT, WARMUP),
        aliases=("loss/mean",),
        final=FINAL_LOSS,
    ),
    Metric(TOKEN_ACCURACY, "token accuracy", (SFT, WARMUP), HIGHER, shown=_shown(MONITOR)),
    Metric("learning_rate", "learning rate", ALL, shown=_shown(COLUMN), aliases=("lr",)),
    Metric(GRAD_NORM, "grad norm", ALL, shown=_shown(PICK, COLUMN, HEALTH)),
    Metric("entropy", "entropy", (RL,), shown=_shown(COLUMN)),
    Metric(TOKENS_PER_S, "tokens/s", ALL, HIGHER, "tokens/s", shown=_shown(COLUMN)),
    Metric(FRAC_ZERO_STD, "groups without reward variance", (RL,), LOWER, shown=_shown(HEALTH)),
    Metric(REWARD_CALLS, "completions scored", (RL,), shown=_shown(HEALTH, SIDEBAR)),
    Metric(REWARD_ERRORS, "reward calls that raised", (RL,), LOWER, shown=_shown(HEALTH, SIDEBAR)),
    Metric(REWARD_ERRORS_BY, "reward calls that raised, by function", (RL,), LOWER, shown=_shown(HEALTH, SIDEBAR)),
)

# wall-clock timings: they differ between identical runs (a rerun is compared without them)
_TIMING_KEYS = frozenset({"time", "step_time", "train_runtime", "eval/time_s"})
_TIMING_SUFFIXES = ("time_s", "/s", "_per_second", "runtime")


def _check(table: tuple[Metric, ...]) -> None:
    """The table's own rules (an import fails on a bad row rather than a view drawing it oddly)."""
    keys = [m.key for m in table]
    if len(set(keys)) != len(keys):
        raise ValueError(f"metric keys declared twice: {sorted(k for k in keys if keys.count(k) > 1)}")
    for m in table:
        if not set(m.phases) <= set(PHASES) or not set(m.main) <= set(m.phases):
            raise ValueError(f"metric {m.key}: phases {m.phases}, main {m.main} (known: {PHASES})")
        if not m.shown <= set(VIEWS) or m.direction not in (HIGHER, LOWER, None):
            raise ValueError(f"metric {m.key}: shown {sorted(m.shown)}, direction {m.direction}")


_check(METRICS)


# -- reading keys -------------------------------------------------------------------------------
def is_warmup_key(key: str) -> bool:
    return key.startswith(WARMUP_PREFIX)


def is_eval_key(key: str) -> bool:
    return key.startswith(EVAL_PREFIX)


def bare(key: str) -> str:
    """The key without the warm-up prefix."""
    return key.removeprefix(WARMUP_PREFIX)


def warmup(key: str) -> str:
    return WARMUP_PREFIX + key


def is_warmup_row(row: Mapping[str, Any]) -> bool:
    """A row of the SFT warm-up: its ``phase`` says so, or (older rows) a key has the prefix."""
    return row.get("phase") == WARMUP or any(is_warmup_key(k) for k in row)


def row_phase(row: Mapping[str, Any]) -> str | None:
    """The row's ``phase`` field, or the warm-up's when its keys say so (rows written before the
    field existed), else None."""
    phase = row.get("phase")
    if isinstance(phase, str):
        return phase
    return WARMUP if any(is_warmup_key(k) for k in row) else None


def match(key: str) -> Metric | None:
    """The table's row for ``key`` (an exact name, an alias, or a pattern's instance; the warm-up
    prefix seen through), or None for a metric the table does not know."""
    name = bare(key)
    for m in METRICS:
        if name == m.key or name in m.aliases or (m.is_pattern and m.pattern.match(name)):
            return m
    return None


def instances(metric: Metric | str, keys: Iterable[str], *, warm: bool = False) -> list[str]:
    """The keys among ``keys`` that are ``metric`` (its name, aliases or pattern instances), of the
    warm-up (``warm``) or not; a pattern's sorted, the others in the table's order (name first)."""
    m = metric if isinstance(metric, Metric) else by_key(metric)
    seen = set(keys)
    prefix = WARMUP_PREFIX if warm else ""
    if m.is_pattern:
        return sorted(k for k in seen if k.startswith(prefix) and m.pattern.match(k[len(prefix) :]))
    return [prefix + n for n in (m.key, *m.aliases) if prefix + n in seen]


def by_key(key: str) -> Metric:
    for m in METRICS:
        if m.key == key:
            return m
    raise KeyError(f"no metric {key!r} in primenb.protocol.metrics.METRICS")


def shown_in(view: str, phase: str | None = None) -> list[Metric]:
    """The metrics a view shows (in ``phase``, when given), in the table's order."""
    return [m for m in METRICS if view in m.shown and (phase is None or phase in m.phases)]


def main_metric(phase: str) -> Metric:
    return next(m for m in METRICS if phase in m.main)


def higher_is_better(key: str) -> bool | None:
    m = match(key)
    return None if m is None or m.direction is None else m.direction == HIGHER


def label(key: str) -> str:
    """A chart title for ``key``: the table's label (the warm-up's prefixed), else the key."""
    m = match(key)
    if m is None or m.is_pattern:
        return key
    if not is_warmup_key(key):
        return m.label
    # the warm-up's first panel names its phase in full ("SFT warm-up loss"), the others briefly
    return f"SFT warm-up {m.label}" if WARMUP in m.main else f"warm-up {m.label}"


def is_timing_key(key: str) -> bool:
    name = bare(key)
    return name in _TIMING_KEYS or name.endswith(_TIMING_SUFFIXES)


# -- what the views draw ------------------------------------------------------------------------
def first_present(metric: Metric | str, keys: Iterable[str], *, warm: bool = False) -> str | None:
    """The key ``metric`` is logged under in ``keys`` (its name, else an alias), or None."""
    found = instances(metric, keys, warm=warm)
    return found[0] if found else None


def with_main_names(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with each main metric (train reward, loss) also under its own name when it was
    logged only under an alias (a platform's ``reward/mean``): the name every view looks for."""
    for m in METRICS:
        alias = _first_alias(m, row) if m.main and m.key not in row else None
        if alias:
            row[m.key] = row[alias]
    return row


def _first_alias(metric: Metric, row: Mapping[str, Any]) -> str | None:
    return next((a for a in metric.aliases if a in row), None)


def eval_keys(keys: Iterable[str], *, warm: bool = False) -> list[str]:
    """The eval reward keys (one per eval source), sorted."""
    return instances(EVAL_REWARD, keys, warm=warm)


def curve_keys(keys: Iterable[str]) -> list[str]:
    """What the trace view and `compare` draw by default: the chart metrics of the main phase, in
    the table's order (train reward, eval rewards, loss)."""
    seen = list(keys)
    return [k for m in shown_in(CHART) for k in instances(m, seen)]


def summarised_curves(keys: Iterable[str]) -> list[str]:
    """The exact-name curve metrics trace.json summarises (``curves``), the warm-up's included."""
    seen = set(keys)
    return [k for m in shown_in(CURVE) if not m.is_pattern for w in (False, True) for k in instances(m, seen, warm=w)]


def summarised_evals(keys: Iterable[str]) -> list[str]:
    """The eval metrics trace.json summarises (``eval``: final and best with their steps)."""
    seen = set(keys)
    return sorted(k for m in shown_in(CURVE) if m.is_pattern for k in instances(m, seen))


def panel_metrics(view: str, phase: str) -> list[Metric]:
    """A phase's panels in a view (MONITOR, SUMMARY): its main metric, the evals, then the rest
    in the table's order."""
    shown = shown_in(view, phase)
    first = [m for m in shown if phase in m.main] + [m for m in shown if m.key == EVAL_REWARD]
    return first + [m for m in shown if m not in first]


def headline_keys(keys: Iterable[str]) -> list[str]:
    """The values a run's headline shows: the summary's exact-name metrics of the main phase,
    the eval rewards; the warm-up's main metric while only the warm-up has logged."""
    seen = set(keys)
    out = [k for m in shown_in(SUMMARY) if m.main for k in instances(m, seen)[:1]]
    out += eval_keys(seen)
    if not any(instances(m, seen) for m in shown_in(SUMMARY) if m.main):
        out += instances(main_metric(WARMUP), seen, warm=True)
    return out


def columns(keys: Iterable[str]) -> list[str]:
    """The tidy DataFrame's leading metric columns present in ``keys``, in the table's order."""
    seen = list(dict.fromkeys(keys))
    return [k for m in shown_in(COLUMN) for k in instances(m, seen)]


def spark_keys() -> tuple[str, ...]:
    """What the sidebar's sparkline draws, in order of preference: the main metric of RL, of SFT,
    of the warm-up (``reward``, ``loss``, ``warmup/loss``), then the table's other sidebar metrics."""
    main = [warmup(main_metric(p).key) if p == WARMUP else main_metric(p).key for p in PHASES]
    main = [k for k in main if SIDEBAR in by_key(bare(k)).shown]
    rest = [m.key for m in shown_in(SIDEBAR) if not m.main and HEALTH not in m.shown and not m.is_pattern]
    return tuple(dict.fromkeys([*main, *rest]))


def health_keys() -> tuple[str, ...]:
    """The reward-health counts the sidebar folds (a pattern's instances asked for as ``.../*``)."""
    return tuple(re.sub(r"<\w+>", "*", m.key) for m in shown_in(HEALTH) if SIDEBAR in m.shown)


def final_fields() -> dict[str, str]:
    """The trace summary's (and index's) field holding each sidebar metric's last value."""
    return {m.key: m.final for m in shown_in(SIDEBAR) if m.final}


def main_keys() -> dict[str, str]:
    """The main metric of each mode (what the sidebar's line shows before a point is drawn)."""
    return {phase: main_metric(phase).key for phase in (RL, SFT)}


SPARK_KEYS, HEALTH_KEYS, MAIN_KEYS = spark_keys(), health_keys(), main_keys()


def table_json() -> list[dict[str, Any]]:
    """The table as JSON (the sidebar's generated copy)."""
    return [
        {
            "key": m.key,
            "label": m.label,
            "phases": list(m.phases),
            "direction": m.direction,
            "unit": m.unit,
            "shown": sorted(m.shown),
        }
        for m in METRICS
    ]


__all__ = [
    "CHART",
    "COLUMN",
    "CURVE",
    "EVAL_PREFIX",
    "HEALTH",
    "HEALTH_KEYS",
    "HIGHER",
    "LOWER",
    "MAIN_KEYS",
    "METRICS",
    "MONITOR",
    "PICK",
    "RL",
    "SFT",
    "SIDEBAR",
    "SPARK_KEYS",
    "SUMMARY",
    "WARMUP",
    "WARMUP_PREFIX",
    "Metric",
    "bare",
    "by_key",
    "columns",
    "curve_keys",
    "eval_keys",
    "final_fields",
    "first_present",
    "headline_keys",
    "health_keys",
    "higher_is_better",
    "instances",
    "is_eval_key",
    "is_timing_key",
    "is_warmup_key",
    "is_warmup_row",
    "label",
    "main_keys",
    "main_metric",
    "match",
    "panel_metrics",
    "row_phase",
    "shown_in",
    "spark_keys",
    "summarised_curves",
    "summarised_evals",
    "warmup",
    "with_main_names",
]
