"""The live monitor of a run: phase line, progress + ETA, small-multiple charts, warnings,
latest metrics, samples, Stop; and, once the run ends, the static summary in its place.

A background thread tails the run directory (only new rows) and updates the widgets at most
`refresh_seconds` apart; chart memory stays bounded by downsampling old points. When the run ends,
or the kernel shuts down, the display is replaced in place (same ``display_id``) by a bundle with
no widget in it (HTML summary with SVG charts + text), so a saved notebook reopened without the
kernel shows the result instead of "Error displaying widget: model not found".
"""

from __future__ import annotations

import html
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as W
from IPython import get_ipython
from IPython.display import display

from primenb.notebook import fallback
from primenb.notebook.layout import keep_label
from primenb.protocol import metrics as M
from primenb.protocol.documents import StatusDoc, typed
from primenb.protocol.record import read_trace
from primenb.protocol.rundir import FINAL_STATES, QUEUED, STARTING, State, metric_row
from primenb.protocol.tail import JsonlTail
from primenb.render import panels as charts
from primenb.render.health import Health
from primenb.render.phase import EtaClock, phase_line, progress
from primenb.render.summary import (
    STATE_COLORS,
    command_html,
    run_html,
    samples_html,
    status_note,
    status_warnings,
    warnings_html,
)
from primenb.render.svgchart import ERROR, downsample
from primenb.run import Run

# the metrics drawn anyway (the main metrics of RL and SFT); another one asked for is the picked panel
DEFAULT_METRICS = tuple(M.main_keys().values())
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class MetricSeries:
    """Per-metric (step, value) points, at most `max_points` each: old points get averaged."""

    def __init__(self, max_points: int = 2000) -> None:
        self.max_points = max_points
        self.points: dict[str, tuple[list[float], list[float]]] = {}

    def add(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            step = row.get("step")
            if step is None:
                continue
            for key, value in row.items():
                if key in ("step", "time") or not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                xs, ys = self.points.setdefault(key, ([], []))
                xs.append(step)
                ys.append(value)
                if len(xs) > self.max_points:
                    half = self.max_points // 2  # average the older half down to a quarter
                    ox, oy = downsample(xs[:half], ys[:half], half // 2)
                    self.points[key] = (ox + xs[half:], oy + ys[half:])


class Monitor:
    def __init__(
        self,
        run: Run,
        *,
        refresh_seconds: float = 0.5,
        metrics: tuple[str, ...] = DEFAULT_METRICS,
        max_points: int = 2000,
        on_finish: Callable[[Monitor, dict[str, Any]], None] | None = None,
    ) -> None:
        self.run = run
        # called with the static bundle once a *live* display turned static (not when the run had
        # already ended at `show`: that display never held a widget)
        self.on_finish = on_finish
        self.refresh = max(0.5, refresh_seconds)  # at most twice a second
        self.series = MetricSeries(max_points)
        self.health = Health()
        self.eta = EtaClock()
        self.rows_seen = 0
        self.last_row: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self.state = State.UNKNOWN
        self._metrics_tail = JsonlTail(run.files.metrics_path)
        self._samples_tail = JsonlTail(run.files.samples_path)
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._lock = threading.Lock()
        self._poll_lock = threading.RLock()
        self._handle: Any = None
        self._finished = False
        self._final: dict[str, Any] | None = None  # the summary `finish` put in place
        self._stage: str | None = None
        self._launch_pid: int | None = None  # launcher.json's pid (local runs), 0: none
        self._preferred = next((m for m in metrics if m not in DEFAULT_METRICS), None)
        self.updates = 0

        self.title = W.HTML(f"<b>{html.escape(run.name)}</b>")
        self.progress = W.FloatProgress(min=0, max=1, layout=W.Layout(width="240px"))
        # it takes the header's free width, so Stop stays at the header's end whatever the line
        # says (it moved to mid-line when GRPO's shorter line replaced the warm-up's)
        self.phase = W.HTML(layout=W.Layout(min_width="320px", flex="1 1 320px"))
        self.phase.add_class("primenb-phase")
        self.stop_button = W.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            tooltip="save a final checkpoint and stop",
            layout=W.Layout(width="auto", min_width="110px"),
        )
        keep_label(self.stop_button)
        self.stop_button.add_class("primenb-stop")  # the labextension disables it when the kernel goes
        self.stop_button.on_click(lambda _: self.request_stop())
        self.warnings = W.HTML()
        self.picker = W.Combobox(
            placeholder="search a metric for the 4th panel",
            options=[],
            ensure_option=True,
            layout=W.Layout(width="320px"),
        )
        self.picker.layout.display = "none"  # until a panel exists (`_redraw_chart`)
        self.picker.observe(lambda _: self._redraw_chart(), names="value")
        # the latest metrics fold open or shut by the reader's choice: an Accordion keeps that
        # choice across refreshes (a <details> in a refreshed HTML value folds shut every time)
        self.table = W.HTML()
        self.table_box = W.Accordion(children=[self.table], selected_index=None)
        self.table_box.set_title(0, "latest metrics")
        self.table_box.layout.display = "none"
        self.sample_view = W.HTML()
        self.chart_panels = [
            W.HTML(layout=W.Layout(display="none", margin="0 6px 6px 0")) for _ in range(charts.PANELS)
        ]
        for panel in self.chart_panels:
            panel.add_class("primenb-chart")
        grid = W.HBox(self.chart_panels, layout=W.Layout(flex_flow="row wrap"))
        self.chart_box = W.VBox([grid, self.picker], layout=W.Layout(display="none"))
        header = W.HBox(
            [self.title, self.progress, self.phase, self.stop_button],
            layout=W.Layout(flex_flow="row wrap", align_items="center"),  # narrow: wrap, never clip Stop
        )
        # a view outlives its kernel on the page (Kernel -> Restart leaves it as it was, its Stop
        # button dead): it says how to follow the run again from the new kernel. The labextension
        # (kernelRestartNotice.ts) replaces this line by a notice once the kernel has gone, reading
        # the run's name from `data-primenb-run`.
        self.reattach = W.HTML(
            f'<span class="primenb-reattach" data-primenb-run="{html.escape(run.name, quote=True)}" '
            f'style="color:var(--jp-ui-font-color2, #757575);font-size:85%">'
            f"if this kernel restarts, this view stops following the run: "
            f"{command_html(f'%prime_train --attach {run.name}')} follows it again (or stops it with "
            f"{command_html('--stop')})</span>"
        )
        self.widget = W.VBox([header, self.warnings, self.chart_box, self.table_box, self.sample_view, self.reattach])
        self.widget.add_class("primenb-monitor")

    # -- lifecycle -----------------------------------------------------------------------
    def show(self, handle: Any = None) -> Monitor:
        """Display the monitor; with ``handle`` (the launch's starting line) in that display's place."""
        done = self.poll()
        if done:  # nothing will change: the static summary only, no widget to lose later
            self._finished = True
            self._handle = _display(self.static_bundle(), handle)
        else:
            self._handle = _display(self._live_bundle(), handle, metadata=self._snapshot_metadata())
            fallback.finish_on_shutdown(self)
            _settle_after_each_cell(self)
        return self

    def start(self) -> Monitor:
        if self._finished:
            return self
        shell = get_ipython()
        parent = getattr(shell, "parent_header", None)

        def loop() -> None:
            # ipykernel >= 7 routes thread output to the latest cell unless told otherwise.
            if parent and hasattr(shell, "set_thread_parent"):
                shell.set_thread_parent(parent)
            while not self._stop_event.wait(self.refresh):
                if self.poll():
                    self.finish()
                    return

        self._thread = threading.Thread(target=loop, name=f"primenb-monitor-{self.run.name}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop_event.set()

    def finish(self) -> bool:
        """Replace the live display by the static summary (once): the run ended or the kernel goes.
        True when this call did it."""
        with self._lock:
            if self._finished:
                return False
            self._finished = True
        self._stop_event.set()
        self.poll()
        bundle = self._final = self.static_bundle()
        if self._handle is not None:
            self._handle.update(bundle, raw=True)
        fallback.finished(self)
        if self.on_finish is not None:
            self.on_finish(self, bundle)
        return True

    def _snapshot_metadata(self) -> dict[str, Any]:
        """The live display's metadata: a snapshot, and the run's trace, so that a notebook saved
        later keeps the run's view as of then (`primenb.server.snapshots`), not this one's "queued"."""
        doc = read_trace(self.run.dir)
        trace = doc.get("trace_id") if doc else None
        mark = {**fallback.SNAPSHOT_METADATA["primenb"], **({"trace": trace} if isinstance(trace, str) else {})}
        return {"primenb": mark}

    def _live_bundle(self) -> dict[str, Any]:
        bundle = self.widget._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        # text/html for frontends without a widget manager (nbconvert); JupyterLab prefers the
        # widget and shows an error once its model is gone, hence `finish` replacing this bundle
        return {**data, **self.static_bundle()}

    def static_bundle(self) -> dict[str, Any]:
        """HTML (SVG charts, samples, no absolute paths) and text: never the widget mime type."""
        return {"text/html": run_html(self.run), "text/plain": repr(self.run)}

    # -- updates -------------------------------------------------------------------------
    def poll(self) -> bool:
        """Read what is new and refresh the widgets; True once the run has ended."""
        with self._poll_lock:  # the follower thread and a `--wait` cell's finish() may both poll
            return self._poll()

    def _poll(self) -> bool:
        raw = self._metrics_tail.read_new()
        rows = [r for r in map(metric_row, raw) if r is not None]
        new_samples = self._samples_tail.read_new()
        status = self.run.refresh()
        self.health.add(raw)
        if rows:
            self.series.add(rows)
            self.rows_seen += len(rows)
            self.last_row = rows[-1]
            self.table.value = _metrics_table(self.last_row)
            self.table_box.set_title(0, f"latest metrics (step {self.last_row.get('step')})")
            self.table_box.layout.display = "flex"
        self._update_status(status)
        if rows:
            keys = sorted(self.series.points)
            if keys != list(self.picker.options):
                self.picker.options = keys
            self._redraw_chart()
        self.warnings.value = warnings_html(self.health.messages() + status_warnings(status))
        if new_samples:
            self.samples = (self.samples + new_samples)[-8:]
            self.sample_view.value = samples_html(self.samples, n=8)
        self.updates += 1
        return self.state in FINAL_STATES

    def _update_status(self, status: dict[str, Any]) -> None:
        doc = typed(StatusDoc, status)
        p = progress(status)
        self.state = p.state
        self.progress.value = p.fraction
        self.progress.layout.visibility = "visible" if p.counting or p.state in FINAL_STATES else "hidden"
        stage = charts.stage_of(p.phase, doc.mode, set(self.series.points))
        if stage != self._stage:
            self._stage = stage
            self.chart_box.layout.display = "flex" if stage else "none"
        color = STATE_COLORS.get(p.state, "#888")
        waited = self.eta.waited(p) if p.state in (State.QUEUED, State.RUNNING) and not p.counting else None
        line = phase_line(p, self.eta.eta(p), waited)
        if p.phase in (QUEUED, STARTING) and self._pid():
            line += f" · process {self._pid()}"  # the launch's own line said so: keep saying it
        if p.state == State.RUNNING and not stage:
            line += " (charts appear with the first logged step)"
        error = f' · <span style="color:{ERROR}">{html.escape(doc.error)}</span>' if doc.error else ""
        self.title.value = f'<b>{html.escape(self.run.name)}</b> <b style="color:{color}">{html.escape(p.state)}</b>'
        # a remote backend's one-line note: queue position, cost so far, "platform unreachable, retrying"
        note = f" · {html.escape(status_note(doc))}" if status_note(doc) else ""
        self.phase.value = f'<span class="primenb-phase-text">{html.escape(line)}</span>{note}{error}'
        if p.state in FINAL_STATES:
            self.stop_button.disabled = True
            self.stop_button.description = p.state.capitalize()  # never left at "Stopping…"
            self.stop_button.icon = "check" if p.state == State.COMPLETED else "stop"
            self.stop_button.button_style = "success" if p.state == State.COMPLETED else ""

    def _pid(self) -> int | None:
        if self._launch_pid is None:
            pid = (self.run.launcher or {}).get("pid")
            self._launch_pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else 0
        return self._launch_pid or None

    def _redraw_chart(self) -> None:
        if self._stage is None:
            return
        picked = self.picker.value or self._preferred
        counts = {k: len(xs) for k, (xs, _) in self.series.points.items()}
        layout = charts.panels(self._stage, set(self.series.points), picked, counts)
        # the search box picks a panel's metric: it comes with the first panel, not before. Each
        # change is its own message, applied in order: the box shows after the panels, hides before
        if not layout:
            self.picker.layout.display = "none"
        for i, view in enumerate(self.chart_panels):
            if i < len(layout):
                view.value = charts.panel_svg(layout[i], self.series.points)  # unchanged: nothing sent
                view.layout.display = "block"
            else:
                view.layout.display = "none"
        if layout:
            self.picker.layout.display = "flex"

    def request_stop(self) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self.stop_button.icon = "hourglass-half"
        self.run.stop(wait=False)


def _display(bundle: dict[str, Any], handle: Any, metadata: dict[str, Any] | None = None) -> Any:
    """A new display of ``bundle``, or ``handle``'s display updated to it (same place, same id)."""
    if handle is None:
        return display(bundle, raw=True, display_id=True, metadata=metadata)
    handle.update(bundle, raw=True, metadata=metadata or {})
    return handle


# monitors still live in this kernel, settled after every cell (see `_settle`)
_LIVE: list[Monitor] = []
_HOOKED: set[int] = set()


def _settle_after_each_cell(monitor: Monitor) -> None:
    _LIVE.append(monitor)
    shell = get_ipython()
    if shell is not None and id(shell) not in _HOOKED:
        shell.events.register("post_run_cell", lambda _result: _settle())
        _HOOKED.add(id(shell))


def _settle() -> None:
    """After each cell: a monitor whose run has ended puts its summary in place *from this cell*.

    The follower thread's display update carries the parent of the cell that showed the monitor; a
    headless executor (nbclient, papermill, ``nbconvert --execute``) records only the messages of
    the cell it is running, so the summary a thread sent while ``run.wait()`` ran in a later cell
    would be lost and the saved notebook would say "running". Sent again here, in the running
    cell, it updates the earlier cell's output through its display id; a live page just gets the
    same summary twice."""
    for monitor in list(_LIVE):
        try:
            if not (monitor._finished or monitor.poll()):
                continue
            if not monitor.finish():  # ended earlier, in the follower thread: send its summary again
                if monitor._final is None:
                    continue  # that thread is putting it in place right now: the next cell settles it
                if monitor._handle is not None:
                    monitor._handle.update(monitor._final, raw=True)
        except Exception:  # one broken run directory must not break every cell
            continue
        _LIVE.remove(monitor)


def _metrics_table(row: dict[str, Any]) -> str:
    cells = "".join(
        f"<tr><td style='text-align:left'>{html.escape(k)}</td><td>{v:.5g}</td></tr>"
        for k, v in row.items()
        if isinstance(v, (int, float)) and k != "time"
    )
    return f"<table>{cells}</table>"


# run directory -> the cell execution that last showed its monitor
_SHOWN_IN: dict[str, int] = {}


def show_monitor(
    run: Run,
    *,
    on_finish: Callable[[Monitor, dict[str, Any]], None] | None = None,
    starting: Any = None,
) -> Monitor | None:
    """Display a run's monitor once per cell execution, following it while it runs; ``starting``
    is the display handle of the launch's starting line, which the monitor replaces."""
    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    if count is not None and _SHOWN_IN.get(str(run.dir)) == count:
        if starting is not None:  # never leave "starting: …" behind a monitor shown elsewhere
            starting.update({"text/plain": repr(run), "text/html": html.escape(repr(run))}, raw=True)
        return None  # the magic already showed it; the displayhook must not show a second one
    if count is not None:
        _SHOWN_IN[str(run.dir)] = count
    settings = _settings(run)
    monitor = Monitor(
        run,
        refresh_seconds=settings.get("refresh_seconds", 0.5),
        metrics=tuple(settings.get("metrics", DEFAULT_METRICS)),
        max_points=settings.get("max_points", 2000),
        on_finish=on_finish,
    ).show(starting)
    return monitor.start()


def follow_in_cell(run: Run, *, wait: bool, starting: Any = None) -> Run:
    """Show a freshly launched run's monitor (in the place of ``starting``, the launch's first
    line, when given); with `wait`, block until it ends (Ctrl-C/interrupt stops the waiting, not
    the run) and put the summary in place before the cell ends."""
    monitor = show_monitor(run, starting=starting)
    if wait:
        try:
            run.wait()
        except KeyboardInterrupt:
            print(f"stopped waiting; {run.name} keeps training (stop it with %prime_train --stop {run.name})")
            return run
        if monitor is not None:
            monitor.finish()  # in this cell's execution: nbclient/nbconvert see the summary too
    return run


def follow_in_output(output: W.Output, run: Run) -> Monitor | None:
    """Show a run's monitor inside an ``Output`` widget (the builder's, the browser's) and leave
    the summary there when the run ends.

    `Monitor.finish` swaps its display for the summary with a display-id update, which a display
    inside an Output widget may never receive (the page routes it to the cell, not the widget),
    so a live monitor could stay behind. Here the Output's own ``outputs`` (synced to the page)
    get the summary in place of the monitor's view instead."""

    def settle(monitor: Monitor, bundle: dict[str, Any]) -> None:
        _replace_view(output, monitor.widget.model_id, bundle)

    with output:
        return show_monitor(run, on_finish=settle)


def _replace_view(output: W.Output, model_id: str, bundle: dict[str, Any]) -> None:
    """Put ``bundle`` where the Output shows the widget ``model_id`` (other outputs stay: two
    launches, two monitors); append it if the page has not reported that view, unless the page
    already shows this summary (the display update did arrive)."""
    summary = {"output_type": "display_data", "data": bundle, "metadata": {}}
    outputs = list(output.outputs)
    for i, out in enumerate(outputs):
        if ((out.get("data") or {}).get(WIDGET_MIME) or {}).get("model_id") == model_id:
            outputs[i] = summary
            output.outputs = tuple(outputs)
            return
    if not any((out.get("data") or {}).get("text/html") == bundle["text/html"] for out in outputs):
        output.outputs = (*outputs, summary)


def _settings(run: Run) -> dict[str, Any]:
    try:
        return dict((run.config.get("primenb") or {}).get("monitor") or {})
    except (OSError, ValueError):
        return {}
