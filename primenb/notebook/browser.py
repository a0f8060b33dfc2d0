"""`HarnessBrowser`: the trace table as a data grid, with filters, multi-select and actions.

The grid is ipydatagrid (a canvas grid: 10,000 rows scroll and sort in the page without lag).
Filters run here in pandas on the table `primenb.harness.traces()` returns, and the grid gets
only the matching rows and the shown columns. Every action calls the harness function the
`%prime_harness` subcommand of the same name calls.
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import ipywidgets as W
from IPython.display import display

from primenb.errors import PrimenbError
from primenb.notebook import fallback
from primenb.notebook.feedback import Feedback
from primenb.notebook.layout import wrapping_row
from primenb.protocol.documents import State
from primenb.render.summary import short_path
from primenb.traces.table import DISPLAY

if TYPE_CHECKING:
    import pandas as pd

    from primenb.run import Run

ANY = "any"
STATES = (State.COMPLETED, State.FAILED, State.STOPPED, State.RUNNING, State.QUEUED)
# the grid's columns (the trace id is the row header); the rest stay in `browser.frame`
GRID_COLUMNS = tuple(c for c in DISPLAY if c not in ("trace", "parent")) + ("parent",)
MAX_NEWEST = 10**9
SEARCHED = ("trace", "name", "model", "env", "parent", "backend")


def _load_index(where: str | None = None) -> pd.DataFrame:
    import primenb.harness as h

    return h.traces(where=where)


def _index_signature() -> Any:
    """Changes when a trace is added, removed or updated, or a live run moves on (cheap: one
    aggregate query and the status file of each live run)."""
    from primenb.protocol.index import Index, status_in
    from primenb.protocol.rundir import LIVE_STATES, RunDir

    index = Index()
    head = index.query("SELECT COUNT(*), MAX(created), SUM(revision) FROM traces")
    cond, params = status_in(LIVE_STATES)
    live = index.query(f"SELECT run_dir FROM traces WHERE {cond}", params)
    steps = []
    for (run_dir,) in live:
        st = RunDir(run_dir).read_status()
        steps.append((run_dir, st.get("state"), st.get("step")))
    return (tuple(head[0]) if head else (), tuple(steps))


class HarnessBrowser(Feedback):
    """Browse, filter and act on traces. ``load`` returns the trace table (default: the harness
    index); ``refresh_seconds`` is how often a displayed browser checks for changed runs."""

    def __init__(
        self,
        *,
        load: Callable[[], pd.DataFrame] | None = None,
        refresh_seconds: float = 2.0,
        height: str = "320px",
        where: str | None = None,
    ) -> None:
        from ipydatagrid import DataGrid

        # `where`: an SQL expression over the index columns, as `%prime_harness show --where`
        self.where = where.strip() if where and where.strip() else None
        self._load = load or (lambda: _load_index(self.where))
        self._signature: Callable[[], Any] | None = None if load else _index_signature
        self._last_signature: Any = None
        self.refresh_seconds = max(0.5, refresh_seconds)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.RLock()
        self.frame = self._load()  # every trace, every column
        self._shown: pd.DataFrame | None = None  # what the grid was last sent
        self.runs: list[Run] = []
        self.pending_remove: tuple[str, ...] = ()

        self.status_filter = W.Dropdown(options=[ANY, *STATES], description="status", layout=W.Layout(width="190px"))
        self.mode_filter = W.Dropdown(options=[ANY, "rl", "sft"], description="mode", layout=W.Layout(width="150px"))
        self.model_filter = W.Dropdown(options=[ANY], description="model", layout=W.Layout(width="260px"))
        self.env_filter = W.Dropdown(options=[ANY], description="env", layout=W.Layout(width="220px"))
        self.search = W.Text(placeholder="search id, name, model, env", layout=W.Layout(width="220px"))
        self.sort_by = W.Dropdown(
            options=list(GRID_COLUMNS), value="created", description="sort", layout=W.Layout(width="200px")
        )
        self.descending = W.Checkbox(value=True, description="newest/largest first", indent=False)
        self.newest = W.BoundedIntText(
            value=0,
            min=0,
            max=MAX_NEWEST,
            description="newest",
            tooltip="only the newest N traces that pass the filters (0: all)",
            layout=W.Layout(width="150px"),
        )
        for w in (
            self.status_filter,
            self.mode_filter,
            self.model_filter,
            self.env_filter,
            self.sort_by,
            self.descending,
            self.newest,
        ):
            w.observe(lambda _: self._show(), names="value")
        self.search.observe(lambda _: self._show(), names="value")

        self.grid = DataGrid(
            self._grid_frame(self.frame.iloc[:0]),
            selection_mode="row",
            base_column_size=110,
            base_row_header_size=100,
            column_widths={"created": 150},  # "2026-12-05 05:13:33" whole, not cut
            layout=W.Layout(height=height, width="100%"),
        )
        self.grid.add_class("primenb-grid")
        self.grid.observe(lambda _: self._selection_changed(), names="selections")
        self.count = W.HTML()

        self.steps = W.IntText(value=0, description="steps", layout=W.Layout(width="150px"))
        self.overrides = W.Text(placeholder="key=value key=value", layout=W.Layout(width="240px"))
        self.export_path = W.Text(placeholder="export folder", layout=W.Layout(width="180px"))
        self.rm_files = W.Checkbox(
            value=False, description="and its files", indent=False, layout=W.Layout(width="110px")
        )
        self.buttons = {
            "details": W.Button(description="Details", icon="info"),
            "diff": W.Button(description="Diff", icon="columns"),
            "compare": W.Button(description="Compare", icon="line-chart"),
            "apply": W.Button(description="Apply", icon="play", button_style="success"),
            "export": W.Button(description="Export", icon="download"),
            "remove": W.Button(description="Remove", icon="trash", button_style="danger"),
            "refresh": W.Button(description="Refresh", icon="refresh"),
        }
        self.confirm = W.Button(description="Yes, remove", button_style="danger", layout=W.Layout(display="none"))
        self.cancel = W.Button(description="Cancel", layout=W.Layout(display="none"))
        for name, button in self.buttons.items():
            button.on_click(lambda _, name=name: self._guard(getattr(self, name)))
        self.confirm.on_click(lambda _: self._guard(self.confirm_remove))
        self.cancel.on_click(lambda _: self._guard(self._disarm))
        self.message = W.HTML()
        self.output = W.Output()
        self.results = W.VBox()  # the latest diff and compare, each in its own slot
        self._slots: dict[str, W.Output] = {}
        self.widget = self._layout()
        self._fill_filter_options()
        self._show()

    # -- the table ------------------------------------------------------------------------------
    @property
    def view(self) -> pd.DataFrame:
        """The traces the filters let through, in the chosen order (every column)."""
        df = self.frame
        if self.status_filter.value != ANY:  # one state, or several from `filter(status="a,b")`
            df = df[df["status"].isin(str(self.status_filter.value).split(","))]
        if self.mode_filter.value != ANY:
            df = df[df["mode"] == self.mode_filter.value]
        if self.model_filter.value != ANY:
            df = df[df["model"] == self.model_filter.value]
        if self.env_filter.value != ANY:
            df = df[df["env"] == self.env_filter.value]
        words = str(self.search.value).strip().lower().split()
        if words:
            cols = [df[c].astype("string").fillna("") for c in SEARCHED if c in df.columns]
            text = cols[0].str.cat(cols[1:], sep=" ").str.lower()
            for word in words:
                df = df[text.str.contains(word, regex=False)]
                text = text[text.str.contains(word, regex=False)]
        if self.newest.value and "created" in df.columns:  # as `--last N`: the newest N that pass
            df = df.sort_values("created", ascending=False, na_position="last", kind="stable").head(self.newest.value)
        if self.sort_by.value in df.columns:
            df = df.sort_values(
                self.sort_by.value, ascending=not self.descending.value, na_position="last", kind="stable"
            )
        return df

    def _grid_frame(self, df: pd.DataFrame) -> pd.DataFrame:
        """What the page receives: the shown columns only, as display-ready values."""
        out = df[[c for c in GRID_COLUMNS if c in df.columns]].copy()
        out.index = df["trace"].astype(str) if "trace" in df.columns else out.index.astype(str)
        out.index.name = "trace"
        if "created" in out.columns:
            out["created"] = out["created"].astype("string").str.slice(0, 19).fillna("")
        for col in out.columns:  # NaN is not JSON; the page shows an empty cell instead
            if out[col].dtype == object or str(out[col].dtype) == "string":
                out[col] = out[col].astype("string").fillna("").astype(object)
        return out

    def _show(self) -> None:
        with self._lock:
            shown = self._grid_frame(self.view)
            same = self._shown is not None and list(shown.columns) == list(self._shown.columns)
            if same and shown.equals(self._shown):
                return  # the same rows: sent again, the page's grid would reset and could drop a selection
            self._shown = shown
            keep = self.selected  # a refresh must not drop what the person selected
            self.grid.clear_selection()
            self.grid.data = shown
            rows = set(self.grid.data.index)
            self._select_rows([t for t in keep if t in rows])

    def _fill_filter_options(self) -> None:
        for widget, col in ((self.model_filter, "model"), (self.env_filter, "env")):
            values = sorted({str(v) for v in self.frame.get(col, []) if v is not None and v == v})
            keep = widget.value if widget.value in values else ANY
            widget.options = [ANY, *values]
            widget.value = keep

    def filter(
        self,
        *,
        status: str | None = None,
        model: str | None = None,
        env: str | None = None,
        search: str | None = None,
        last: int | None = None,
    ) -> HarnessBrowser:
        """Set the filters as a person would, with `%prime_harness show`'s meanings: ``status``
        one state or several (``completed,failed``); ``model`` and ``env`` substrings: the dropdown
        takes the one value containing it, else (none or several) the substring goes to the search
        box; ``last``: only the newest N traces that pass."""
        if status:
            self.status_filter.value = self._status_option(status)
        words = [search.strip()] if search and search.strip() else []
        for widget, text in ((self.model_filter, model), (self.env_filter, env)):
            if not text or not text.strip():
                continue
            hits = [o for o in widget.options if o != ANY and text.strip().lower() in str(o).lower()]
            if len(hits) == 1:
                widget.value = hits[0]
            else:
                words.append(text.strip())
        if words:
            self.search.value = " ".join(words)
        if last is not None:
            if last < 1:
                raise PrimenbError(f"--last {last}: give how many of the newest traces to show (1 or more)")
            self.newest.value = min(last, MAX_NEWEST)
        return self

    def _status_option(self, status: str) -> str:
        """The status dropdown's option for ``a,b`` (added when it lists several states)."""
        states = list(dict.fromkeys(s.strip() for s in status.split(",") if s.strip()))
        unknown = [s for s in states if s not in STATES]
        if unknown or not states:
            given = ", ".join(unknown) or repr(status)
            raise PrimenbError(f"unknown status {given}: use {', '.join(STATES)} (a,b,...)")
        value = ",".join(states)
        if value not in self.status_filter.options:
            self.status_filter.options = [*self.status_filter.options, value]
        return value

    def refresh(self) -> None:
        """Reload the traces (keeps the filters)."""
        with self._lock:
            self.frame = self._load()
            self._fill_filter_options()
            self._show()

    # -- selection -------------------------------------------------------------------------------
    @property
    def selected(self) -> list[str]:
        """Ids of the selected traces, in table order."""
        visible = self.grid.get_visible_data()
        rows: list[int] = []
        for rect in self.grid.selections:
            for r in range(min(rect["r1"], rect["r2"]), max(rect["r1"], rect["r2"]) + 1):
                if 0 <= r < len(visible) and r not in rows:
                    rows.append(r)
        return [str(visible.index[r]) for r in sorted(rows)]

    def select(self, *trace_ids: str) -> list[str]:
        """Select these traces (as a click and ctrl-clicks would); unknown or hidden ids are an error."""
        visible = set(self.grid.get_visible_data().index.astype(str))
        for tid in trace_ids:
            if tid not in visible:
                raise PrimenbError(
                    f"trace {tid} is not in the table as filtered now: clear the filters, search and newest box"
                )
        self.grid.clear_selection()
        self._select_rows(list(trace_ids))
        return self.selected

    def _select_rows(self, trace_ids: list[str]) -> None:
        visible = list(self.grid.get_visible_data().index.astype(str))
        for tid in trace_ids:
            r = visible.index(tid)
            self.grid.select(r, 0, r, max(0, len(self.grid.data.columns) - 1))
        self._selection_changed()

    def _selection_changed(self) -> None:
        n = len(self.grid.selections) and len(self.selected)
        where = f" where {html.escape(self.where)}" if self.where else ""
        self.count.value = f"{len(self.grid.data)} of {len(self.frame)} trace(s){where}" + (
            f" · {n} selected" if n else ""
        )

    def _need(self, least: int, most: int | None = None, doing: str = "") -> list[str]:
        with self._lock:  # never read mid-refresh, between clearing the selection and restoring it
            ids = self.selected
        if len(ids) < least or (most is not None and len(ids) > most):
            want = f"{least}" if most == least else f"at least {least}" if most is None else f"{least} to {most}"
            raise PrimenbError(f"select {want} trace(s) to {doing} (selected: {len(ids)}; ctrl/shift-click rows)")
        return ids

    # -- actions: each is what the %prime_harness subcommand of the same name does ----------------
    def details(self) -> list[Any]:
        import primenb.harness as h

        traces = [h.get(t) for t in self._need(1, 3, "show details")]
        self._display(*traces)
        return traces

    def diff(self) -> Any:
        import primenb.harness as h

        ids = self._need(2, None, "diff")
        self._say(f"diffing {len(ids)} traces…")
        result = h.diff(*ids)
        self._display(result, slot="diff")
        self._say("")
        return result

    def compare(self) -> Any:
        import primenb.harness as h

        ids = self._need(2, None, "compare")
        # reading every metric row of each trace takes seconds (10 s+ under load): say so meanwhile
        self._say(f"comparing {len(ids)} traces (reading their metrics)…")
        result = h.compare(*ids)
        self._display(result, slot="compare")
        self._say("")
        return result

    def apply(self) -> Run:
        """Continue the selected trace (steps and ``key=value`` overrides from the boxes)."""
        import shlex

        import primenb.harness as h
        from primenb.notebook.monitor import follow_in_output

        (tid,) = self._need(1, 1, "apply")
        overrides = shlex.split(self.overrides.value or "")
        run = h.apply(tid, steps=self.steps.value or None, overrides=overrides)
        self.output.clear_output()
        follow_in_output(self.output, run)  # the summary replaces the monitor when the run ends
        self.runs.append(run)
        self._say(f"started {run.name} (parent {tid})")
        self.refresh()
        return run

    def export(self) -> Any:
        import primenb.harness as h

        (tid,) = self._need(1, 1, "export")
        if not self.export_path.value.strip():
            raise PrimenbError("type the folder to export to in the box next to Export")
        where = h.export(tid, self.export_path.value.strip())
        self._say(f"exported {tid} to {html.escape(short_path(where))}")  # no absolute path
        return where

    def remove(self) -> tuple[str, ...]:
        """Arm a removal: nothing is removed until the confirmation button is clicked."""
        self.pending_remove = tuple(self._need(1, None, "remove"))
        what = "trace(s) and their run directories" if self.rm_files.value else "trace(s) (run directories kept)"
        ids = html.escape(", ".join(self.pending_remove))
        self._say(f"remove {len(self.pending_remove)} {what}: {ids}?", error=True)
        self.confirm.layout.display = self.cancel.layout.display = ""
        return self.pending_remove

    def confirm_remove(self) -> list[str]:
        import primenb.harness as h

        ids, self.pending_remove = self.pending_remove, ()
        if not ids:
            raise PrimenbError("nothing to remove: select traces and click Remove first")
        done = [h.rm(t, files=bool(self.rm_files.value)) for t in ids]
        self._disarm()
        self._say("; ".join(html.escape(d) for d in done))
        self.refresh()
        return done

    def _disarm(self) -> None:
        self.pending_remove = ()
        self.confirm.layout.display = self.cancel.layout.display = "none"

    # -- display and refresh ---------------------------------------------------------------------
    def _layout(self) -> W.Widget:
        b = self.buttons
        filters = wrapping_row([self.status_filter, self.mode_filter, self.model_filter, self.env_filter, self.search])
        order = wrapping_row([self.sort_by, self.descending, self.newest, self.count])
        actions = wrapping_row(
            [b["details"], b["diff"], b["compare"], b["refresh"], b["apply"], self.steps, self.overrides]
        )
        more = wrapping_row([b["export"], self.export_path, b["remove"], self.rm_files, self.confirm, self.cancel])
        box = W.VBox([filters, order, self.grid, actions, more, self.message, self.output, self.results])
        box.add_class("primenb-harness-browser")
        return box

    def _static(self) -> dict[str, Any]:
        from primenb.traces.table import TraceFrame

        frame = TraceFrame(self.view)
        return {"text/html": frame._repr_html_(), "text/plain": repr(frame)}

    def _ipython_display_(self) -> None:
        fallback.show(self.widget, self._static)
        self.start()

    def __repr__(self) -> str:
        return f"<primenb HarnessBrowser: {len(self.grid.data)} of {len(self.frame)} trace(s) shown>"

    def start(self) -> HarnessBrowser:
        """Watch the index in the background and refresh when runs change."""
        if self._signature is None or (self._thread is not None and self._thread.is_alive()):
            return self
        self._last_signature = self._safe_signature()

        def loop() -> None:
            while not self._stop.wait(self.refresh_seconds):
                sig = self._safe_signature()
                if sig is not None and sig != self._last_signature:
                    self._last_signature = sig
                    self._guard(self.refresh)

        self._thread = threading.Thread(target=loop, name="primenb-harness-browser", daemon=True)
        self._thread.start()
        return self

    def _safe_signature(self) -> Any:
        try:
            return self._signature() if self._signature else None
        except Exception:
            return None

    def close(self) -> None:
        """Stop watching, replace the display by a static table, close the widgets."""
        self._stop.set()
        for handle, widget, _ in list(fallback._LIVE.values()):
            if widget is self.widget:
                fallback.freeze(handle)
        self.grid.close()
        self.widget.close()

    def _display(self, *objs: Any, slot: str | None = None) -> None:
        """Show ``objs`` in the main output, or in the ``slot`` of its action (diff, compare), so a
        Compare keeps the Diff shown above it instead of clearing it."""
        out = self.output
        if slot is not None:
            if slot not in self._slots:
                self._slots[slot] = W.Output()
                self.results.children = (*self.results.children, self._slots[slot])
            out = self._slots[slot]
        out.clear_output()
        with out:
            for obj in objs:
                display(obj)


def show_browser(
    *,
    status: str | None = None,
    model: str | None = None,
    env: str | None = None,
    last: int | None = None,
    where: str | None = None,
    trace: Any = None,
    show: bool = True,
) -> HarnessBrowser:
    """Display a new harness browser, with show's filters set (see `HarnessBrowser.filter`) and
    ``trace`` (any reference `harness.get` takes) selected; ``show=False`` only returns it (what
    `%prime_harness show --ui` does: the cell displays what it returns, once)."""
    browser = HarnessBrowser(where=where)
    try:  # a bad filter or a trace the filters hide: an error, and no half-set browser shown
        browser.filter(status=status, model=model, env=env, last=last)
        if trace is not None:
            import primenb.harness as h

            browser.select(h.get(trace).id)
    except PrimenbError:
        browser.close()
        raise
    if show:
        display(browser)
    return browser


__all__ = ["GRID_COLUMNS", "HarnessBrowser", "show_browser"]
