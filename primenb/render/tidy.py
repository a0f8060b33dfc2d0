"""Tidy views of a run's files for people: metrics and samples as DataFrames, logs as text.

The engine appends one metrics row per event (a train log, an eval, TRL's end-of-training
summary, a warm-up log under ``warmup/*`` keys), which is right for a tailing reader but not for
a person: `metrics_frame` merges them into one row per (phase, step) with the columns people look
at first. `samples_frame` flattens reward components into columns and renders completions as
readable, left-aligned text. The raw rows stay available (`Run.metrics_raw`, `Run.metric_rows`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd  # a view module: `Run` imports it only when a DataFrame is asked for

from primenb.protocol import metrics as M
from primenb.protocol.rundir import TRAINING, metric_row

WARMUP_PHASE = M.WARMUP  # status.json's name for the SFT warm-up of an RL run
MAIN_PHASE = TRAINING  # status.json's name for the run's own trainer
_MAX_PHASE_CHARS = 40  # a "phase" from a foreign or hand-edited file is a label, not a payload

# Leading columns, in this order, when present (then the metrics table's COLUMN metrics, in its
# order); every other column follows in first-seen order.
_FIRST = ("phase", "step", "time")
_SAMPLE_FIRST = ("phase", "step", "time", "task", "prompt", "completion", "answer", "reward", "correct")
_TEXT_COLUMNS = ("prompt", "completion", "answer")


# -- metrics ------------------------------------------------------------------------------------
def _phase_of(raw: Mapping[str, Any], keys: Iterable[str]) -> str:
    """The row's ``phase`` field when the engine wrote one; else the warm-up prefix tells."""
    phase = raw.get("phase")
    if isinstance(phase, str) and phase.strip():
        return phase.strip()[:_MAX_PHASE_CHARS]
    return WARMUP_PHASE if any(M.is_warmup_key(k) for k in keys) else MAIN_PHASE


def merge_metric_rows(raw_rows: Iterable[Any]) -> list[dict[str, Any]]:
    """One dict per (phase, step), phases in the order they first appear, steps ascending.

    Rows are sanitized as every viewer does (`metric_row`: int step, finite numbers). Within a
    (phase, step) the first value of a key wins: TRL's end-of-training row repeats keys of the
    last train log (``epoch``, a ``tokens/s`` of 0) that must not overwrite them; ``time`` is the
    step's first record."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    phase_order: dict[str, int] = {}
    for raw in raw_rows:
        row = metric_row(raw)
        if row is None:
            continue
        phase = _phase_of(raw, row)
        phase_order.setdefault(phase, len(phase_order))
        target = merged.setdefault((phase, row["step"]), {"phase": phase, "step": row["step"]})
        for key, value in row.items():
            name = M.bare(key)
            target.setdefault(name, value)
    return [merged[k] for k in sorted(merged, key=lambda k: (phase_order[k[0]], k[1]))]


def metric_columns(keys: Iterable[str]) -> list[str]:
    """Column order: phase, step, time, then the metrics table's columns (train reward, eval
    rewards, eval scores, loss, lr, grad norm, ...), then the rest in first-seen order."""
    seen = list(dict.fromkeys(keys))
    first = [k for k in _FIRST if k in seen] + M.columns(seen)
    return first + [k for k in seen if k not in first]


def metrics_frame(raw_rows: Iterable[Any]) -> pd.DataFrame:
    """The tidy metrics DataFrame (see the module docstring); ``time`` as UTC Timestamps."""
    rows = merge_metric_rows(raw_rows)
    if not rows:
        return pd.DataFrame(columns=["phase", "step", "time"])
    keys = [k for r in rows for k in r]
    frame = pd.DataFrame(rows, columns=metric_columns(["phase", "step", "time", *keys]))
    frame["time"] = _timestamps(frame["time"])
    frame["step"] = frame["step"].astype("int64")
    return frame


def _timestamps(values: pd.Series) -> pd.Series:
    """Epoch seconds to UTC Timestamps, to the millisecond (a float's last digits are noise that
    would print as nanoseconds); a missing or unreadable time becomes NaT."""
    numbers = pd.to_numeric(values, errors="coerce")
    return pd.to_datetime(numbers, unit="s", utc=True, errors="coerce").dt.round("ms")


# -- samples ------------------------------------------------------------------------------------
def _flat_sample(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A samples.jsonl row with the per-function rewards dict spread into ``rewards/<name>``."""
    row = {k: v for k, v in raw.items() if k != "rewards"}
    parts = raw.get("rewards")
    if isinstance(parts, Mapping):
        for name, value in parts.items():
            row[f"rewards/{name}"] = value
    elif parts is not None:
        row["rewards"] = parts  # not the engine's shape: keep it as it is
    return row


def samples_frame(raw_rows: Iterable[Any]) -> SamplesFrame:
    """Sample completions, one row each: step, time (UTC Timestamp), task, prompt, completion,
    answer, reward, correct, the reward components, then anything else."""
    rows = [_flat_sample(r) for r in raw_rows if isinstance(r, Mapping)]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    columns = [k for k in _SAMPLE_FIRST if k in keys]
    columns += [k for k in keys if k.startswith("rewards/")]
    columns += [k for k in keys if k not in columns]
    frame = SamplesFrame(pd.DataFrame(rows, columns=columns))
    if "time" in frame.columns:
        frame["time"] = _timestamps(frame["time"])
    if "step" in frame.columns:
        steps = pd.to_numeric(frame["step"], errors="coerce")
        if steps.notna().all() and (steps % 1 == 0).all():
            frame["step"] = steps.astype("int64")
    return frame


def _cell(value: Any) -> str:
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, pd.Timestamp):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


_TEXT_CELL = (
    "text-align:left;white-space:pre-wrap;word-break:break-word;font-family:monospace;"
    "min-width:12em;max-width:40em;vertical-align:top"
)
_OTHER_CELL = "text-align:right;white-space:nowrap;vertical-align:top"
_HEAD_CELL = "text-align:left;white-space:nowrap"


def samples_html(frame: pd.DataFrame, max_rows: int = 60) -> str:
    """An HTML table of samples: text columns left-aligned and wrapped, every cell escaped (a
    completion is model output, never markup); head and tail rows past ``max_rows``."""
    shown = frame
    cut = len(frame) > max_rows
    if cut:
        half = max_rows // 2
        shown = frame.iloc[list(range(half)) + list(range(len(frame) - half, len(frame)))]
    head = "".join(f'<th style="{_HEAD_CELL}">{html.escape(str(c))}</th>' for c in frame.columns)
    body = []
    for i, (_, row) in enumerate(shown.iterrows()):
        if cut and i == max_rows // 2:
            body.append(f'<tr><td colspan="{len(frame.columns)}">… {len(frame) - max_rows} more rows …</td></tr>')
        cells = "".join(
            f'<td style="{_TEXT_CELL if c in _TEXT_COLUMNS else _OTHER_CELL}">{html.escape(_cell(row[c]))}</td>'
            for c in frame.columns
        )
        body.append(f"<tr>{cells}</tr>")
    size = f"<p>{len(frame)} rows x {len(frame.columns)} columns</p>"
    return f'<table class="dataframe"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{size}'


class SamplesFrame(pd.DataFrame):
    """A pandas DataFrame whose notebook view shows completions as readable text; filtering or
    slicing it keeps that view (pandas' documented `_constructor` hook)."""

    @property
    def _constructor(self) -> type:
        return SamplesFrame

    def _repr_html_(self) -> str:
        return samples_html(self)


# -- logs ---------------------------------------------------------------------------------------
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def clean_log_lines(lines: Iterable[str]) -> list[str]:
    """Log lines without terminal colour codes (a library that logs in colour to a file)."""
    return [_ANSI.sub("", line) for line in lines]


class LogText(str):
    """A run's log tail: a `str` (search it, split it) that prints as lines, not as one quoted
    string full of ``\\n``, and shows in a notebook as a scrollable monospace block."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        if not self:
            return "<pre><i>(no log lines yet)</i></pre>"
        return (
            '<pre style="max-height:32em;overflow:auto;white-space:pre-wrap;word-break:break-word;'
            f'text-align:left;font-size:12px;line-height:1.35">{html.escape(str(self))}</pre>'
        )


__all__ = [
    "MAIN_PHASE",
    "WARMUP_PHASE",
    "LogText",
    "SamplesFrame",
    "clean_log_lines",
    "merge_metric_rows",
    "metric_columns",
    "metrics_frame",
    "samples_frame",
    "samples_html",
]
