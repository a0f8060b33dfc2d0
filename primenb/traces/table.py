"""The traces table: a pandas DataFrame (one row per trace, newest first) that displays styled.

Imports pandas: load lazily (``primenb.harness.traces()`` does).
"""

from __future__ import annotations

import datetime as _dt
import sqlite3
from typing import Any

import pandas as pd

from primenb.errors import PrimenbError
from primenb.protocol.documents import FINAL_REWARD, INDEX_SHOWN, is_live_state
from primenb.protocol.index import NAMES, Index, status_in
from primenb.traces import views as V
from primenb.traces.evals import COLUMN_PREFIX, column, read_evals
from primenb.traces.trace import indexed_short_ids
from primenb.traces.views import short_ids

# the shown columns and their order are declared once, with the index row's fields
DISPLAY = INDEX_SHOWN
COLUMNS = tuple(c for c in NAMES if c != "revision")
SHOWN_ROWS = 50


# Column widths (characters) past which a cell is shortened in the middle (`reverse-t…run-12`: the
# end, where names of a sweep differ, stays); the full text is the cell's tooltip in HTML.
CLIP = {"name": 28, "model": 24, "env": 20, "backend": 14}


class TraceFrame(pd.DataFrame):
    """A DataFrame of traces whose notebook display is a readable table (formatted numbers,
    durations, colored status, the newest `SHOWN_ROWS` rows). Derived frames are plain.

    The display fits a notebook: ids shown as their shortest unique prefix (like git), long
    names shortened with an ellipsis (full text on hover), empty columns left out, one line per
    row, and a table wider than the output scrolls sideways instead of being cut off."""

    @property
    def _constructor(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    def _display(self) -> list[str]:
        """The shown columns of this frame, in order: the index's, with one ``eval:<env>``
        column per evaluated environment after the run's own best eval."""
        evals = sorted(c for c in self.columns if isinstance(c, str) and c.startswith(COLUMN_PREFIX))
        cols = [c for c in DISPLAY if c in self.columns]
        at = cols.index("best_eval") + 1 if "best_eval" in cols else len(cols)
        return [*cols[:at], *evals, *cols[at:]]

    def _columns(self, rows: list[dict[str, str]]) -> list[str]:
        """Display columns that have something to show (always the id, name and status)."""
        cols = self._display()
        return [c for c in cols if c in ("trace", "name", "status") or any(r[c] for r in rows)]

    def _rows(self, n: int) -> list[dict[str, str]]:
        head = self.head(n)
        cols = self._display()
        out = []
        for rec in head[cols].itertuples(index=False):
            row = dict(zip(cols, rec, strict=True))
            out.append({c: _cell(c, row) for c in cols})
        return out

    def _shown(self, col: str, text: str) -> str:
        """What a cell shows: an id as its short prefix, a long name clipped."""
        if col in ("trace", "parent"):
            return str((self.attrs.get("short_ids") or {}).get(text, text))
        return V.clip(text, CLIP.get(col))

    def _html_cell(self, col: str, text: str) -> str:
        if col == "status":
            return V.status_badge(text)
        shown = self._shown(col, text)
        return f'<span title="{V.esc(text)}">{V.esc(shown)}</span>' if shown != text else V.esc(text)

    def _repr_html_(self) -> str:
        if not len(self):
            return "<i>no traces yet: every run launched with %prime_train leaves one</i>"
        rows = self._rows(SHOWN_ROWS)
        cols = self._columns(rows)
        cells = [[self._html_cell(c, r[c]) for c in cols] for r in rows]
        body = V.table([_header(c) for c in cols], cells, raw=True, nowrap=True)
        more = len(self) - SHOWN_ROWS
        foot = (
            f'<div style="color:#888;font-size:11px">{len(self)} traces; the newest {SHOWN_ROWS} shown '
            f"(--last N, --where EXPR, or primenb.harness.traces() for all {more + SHOWN_ROWS})</div>"
            if more > 0
            else f'<div style="color:#888;font-size:11px">{len(self)} trace(s)</div>'
        )
        return f'<div class="primenb-traces">{V.scrolling(body)}{foot}</div>'

    def __repr__(self) -> str:
        if not len(self):
            return "(no traces)"
        rows = self._rows(SHOWN_ROWS)
        cols = self._columns(rows)
        cells = [[self._shown(c, r[c]) for c in cols] for r in rows]
        text = V.text_table([_header(c) for c in cols], cells, max_width=None)
        if len(self) > SHOWN_ROWS:
            text += f"\n... {len(self) - SHOWN_ROWS} more (of {len(self)})"
        return text


_HEADERS = {"group_size": "group", "lora_rank": "LoRA", FINAL_REWARD: "reward", "best_eval": "best eval"}


def _header(col: str) -> str:
    return _HEADERS.get(col) or V.clip(col, CLIP["name"])


def _cell(col: str, row: dict[str, Any]) -> str:
    v = row[col]
    if v is None or (isinstance(v, float) and v != v) or v is pd.NaT:
        return ""
    if col == "created":
        return v.strftime("%Y-%m-%d %H:%M:%S") if hasattr(v, "strftime") else str(v)
    if col == "duration":
        return V.fmt_duration(v)
    if col == "steps":
        mx = row.get("max_steps")
        return f"{int(v)}/{int(mx)}" if isinstance(mx, (int, float)) and mx == mx else str(int(v))
    if col in ("trace", "parent"):
        return str(v)
    if col == "lr":
        return f"{v:.1e}"
    if col in ("batch", "group_size", "lora_rank"):
        return str(int(v))
    if col in (FINAL_REWARD, "best_eval") or col.startswith(COLUMN_PREFIX):
        return f"{v:.3f}"
    return str(v)


def _local_tz() -> Any:
    return _dt.datetime.now().astimezone().tzinfo


def query(
    *,
    last: int | None = None,
    status: str | None = None,
    env: str | None = None,
    model: str | None = None,
    where: str | None = None,
    index: Index | None = None,
) -> TraceFrame:
    """Traces newest first, filtered. ``where`` is an SQL expression over the columns
    (e.g. ``"lr > 1e-4 and status = 'completed'"``; ``==`` also works)."""
    index = index or Index()
    conds, params = [], []
    if status:
        cond, states = status_in(s.strip() for s in status.split(",") if s.strip())
        conds.append(cond)
        params += states
    if env:
        conds.append("env LIKE ?")
        params.append(f"%{env}%")
    if model:
        conds.append("model LIKE ?")
        params.append(f"%{model}%")
    if where:
        # passed as written: SQLite reads `==` itself, and rewriting text would also change string
        # literals (`name == 'a==b'`); the query runs read-only and one statement at a time
        conds.append(f"({where})")
    sql = f"SELECT {', '.join(COLUMNS)} FROM traces"
    if conds:
        sql += " WHERE " + " AND ".join(conds)
    sql += " ORDER BY created DESC"
    if last is not None:
        sql += f" LIMIT {max(0, int(last))}"
    try:
        rows = index.query(sql, params)
    except (sqlite3.Error, OverflowError) as exc:
        raise PrimenbError(f"bad --where expression {where!r}: {exc}. Columns: {', '.join(COLUMNS)}") from None
    rows = refresh_live(rows, index)
    df = TraceFrame.from_records(rows, columns=list(COLUMNS)) if rows else TraceFrame(columns=list(COLUMNS))
    df = TraceFrame(df)
    # short ids for the rows a display shows, unique among every trace in the index (the prefix
    # must open this trace in `%prime_harness show ID` whatever the filter); kept small, since
    # pandas copies `attrs` into every frame derived from this one
    at = [COLUMNS.index("trace"), COLUMNS.index("parent")]
    shown = [row[i] for row in rows[:SHOWN_ROWS] for i in at if isinstance(row[i], str)]
    df.attrs["short_ids"] = indexed_short_ids(shown, index)
    if len(df):
        df["created"] = (
            pd.to_datetime(df["created"], unit="s", utc=True).dt.tz_convert(_local_tz()).dt.tz_localize(None)
        )
    add_eval_columns(df)
    return df


def add_eval_columns(df: pd.DataFrame) -> None:
    """One column per evaluated environment, ``eval:<env>``: the latest ``%prime_eval`` mean
    reward of each trace's model there (NaN where it was not evaluated). Read from the run
    directories at each query, so an eval shows as soon as it is stored."""
    means: dict[str, dict[int, float]] = {}
    for pos, run_dir in enumerate(df["run_dir"] if "run_dir" in df.columns else []):
        if not isinstance(run_dir, str):
            continue
        for item in read_evals(run_dir).items:
            if item.mean is not None:
                means.setdefault(column(item.env), {})[pos] = item.mean
    for col in sorted(means):
        df[col] = [means[col].get(pos, float("nan")) for pos in range(len(df))]


def refresh_live(rows: list[tuple[Any, ...]], index: Index) -> list[tuple[Any, ...]]:
    """Rows of queued/running traces get their current step (and a final state, when the engine
    died without completing its trace, even when its run directory cannot be written) from the
    run directory: a few files, only for live runs."""
    from pathlib import Path

    from primenb.protocol.index import index_row
    from primenb.protocol.record import read_trace, reconcile
    from primenb.protocol.rundir import RunDir

    pos = {c: i for i, c in enumerate(COLUMNS)}
    out = []
    for row in rows:
        if is_live_state(row[pos["status"]]) and isinstance(row[pos["run_dir"]], str):
            run_dir = Path(row[pos["run_dir"]])
            doc = read_trace(run_dir)
            if doc is not None and reconcile(doc, run_dir):
                fresh = index_row(doc, run_dir)
                index.upsert_many([fresh])
                row = tuple(fresh.get(c) for c in COLUMNS)
            else:
                step = RunDir(run_dir).status_doc().step
                if step is not None:
                    cells = list(row)
                    cells[pos["steps"]] = step
                    row = tuple(cells)
        out.append(row)
    return out


__all__ = ["COLUMNS", "DISPLAY", "TraceFrame", "add_eval_columns", "query", "refresh_live", "short_ids"]
