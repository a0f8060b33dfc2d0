"""The live monitor of a run: status, progress + ETA, plotly charts, latest metrics, samples, Stop.

A background thread tails the run directory (only new rows), updates the widgets at most
`refresh_seconds` apart, and keeps chart memory bounded by downsampling old points. Where widgets
cannot render, the same display carries a static HTML summary, refreshed when the run ends.
"""

from __future__ import annotations

import html
import threading
import time
from typing import Any

import ipywidgets as W
from IPython import get_ipython
from IPython.display import display

from primenb.protocol.rundir import FINAL_STATES, metric_row
from primenb.protocol.tail import JsonlTail
from primenb.render.summary import STATE_COLORS, reward_key, run_html
from primenb.render.svgchart import downsample
from primenb.run import Run

DEFAULT_METRICS = ("reward", "loss")


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
    ) -> None:
        self.run = run
        self.refresh = max(0.5, refresh_seconds)  # at most twice a second
        self.series = MetricSeries(max_points)
        self.rows_seen = 0
        self.last_row: dict[str, Any] = {}
        self.samples: list[dict[str, Any]] = []
        self._metrics_tail = JsonlTail(run.files.metrics_path)
        self._samples_tail = JsonlTail(run.files.samples_path)
        self._started = time.monotonic()
        self._first_step: tuple[float, int] | None = None
        self._thread: threading.Thread | None = None
        self._stop_event = threading.Event()
        self._handle: Any = None
        self.updates = 0

        self.status = W.HTML()
        self.progress = W.FloatProgress(min=0, max=1, layout=W.Layout(width="320px"))
        self.stop_button = W.Button(
            description="Stop",
            icon="stop",
            button_style="danger",
            tooltip="save a final checkpoint and stop",
            layout=W.Layout(width="90px"),
        )
        self.stop_button.on_click(lambda _: self._request_stop())
        self.picker = W.SelectMultiple(
            options=list(metrics), value=list(metrics), rows=4, layout=W.Layout(width="220px")
        )
        self.picker.observe(lambda _: self._redraw_chart(), names="value")
        self.table = W.HTML()
        self.sample_view = W.HTML()
        self.figure = _make_figure()
        chart = self.figure if self.figure is not None else W.HTML("(install anywidget for live plotly charts)")
        self.widget = W.VBox(
            [
                W.HBox([self.status, self.progress, self.stop_button]),
                W.HBox([chart, W.VBox([W.HTML("<b>metrics</b>"), self.picker])]),
                self.table,
                self.sample_view,
            ]
        )

    # -- lifecycle -----------------------------------------------------------------------
    def show(self) -> Monitor:
        self.poll()
        self._handle = display(self._bundle(), raw=True, display_id=True)
        return self

    def start(self) -> Monitor:
        shell = get_ipython()
        parent = getattr(shell, "parent_header", None)

        def loop() -> None:
            # ipykernel >= 7 routes thread output to the latest cell unless told otherwise.
            if parent and hasattr(shell, "set_thread_parent"):
                shell.set_thread_parent(parent)
            while not self._stop_event.wait(self.refresh):
                done = self.poll()
                if done:
                    self.poll()
                    self._final_update()
                    return

        self._thread = threading.Thread(target=loop, name=f"primenb-monitor-{self.run.name}", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop_event.set()

    def _bundle(self) -> dict[str, Any]:
        """The widget for live frontends plus static HTML for everything else."""
        bundle = self.widget._repr_mimebundle_()
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        return {**data, "text/html": run_html(self.run), "text/plain": repr(self.run)}

    def _final_update(self) -> None:
        if self._handle is not None:
            self._handle.update(self._bundle(), raw=True)

    # -- updates -------------------------------------------------------------------------
    def poll(self) -> bool:
        """Read what is new and refresh the widgets; True once the run has ended."""
        rows = [r for r in map(metric_row, self._metrics_tail.read_new()) if r is not None]
        new_samples = self._samples_tail.read_new()
        status = self.run.refresh()
        if rows:
            self.series.add(rows)
            self.rows_seen += len(rows)
            self.last_row = rows[-1]
            self._update_picker()
            self._redraw_chart()
            self.table.value = _metrics_table(self.last_row)
        if new_samples:
            self.samples = (self.samples + new_samples)[-8:]
            self.sample_view.value = _samples_table(self.samples)
        self._update_status(status)
        self.updates += 1
        return status.get("state") in FINAL_STATES

    def _update_status(self, status: dict[str, Any]) -> None:
        state = str(status.get("state", "unknown"))
        step = int(status.get("step") or self.last_row.get("step") or 0)
        total = status.get("max_steps") or 0
        self.progress.value = step / total if total else 0
        if step and self._first_step is None:
            self._first_step = (time.monotonic(), step)
        eta = ""
        if state == "running" and total and self._first_step and step > self._first_step[1]:
            rate = (step - self._first_step[1]) / (time.monotonic() - self._first_step[0])
            eta = f" · ETA {_duration((total - step) / rate)}"
        color = STATE_COLORS.get(state, "#888")
        error = (
            f' · <span style="color:#c62828">{html.escape(str(status["error"]))}</span>' if status.get("error") else ""
        )
        # a remote backend's one-line note: queue position, cost so far, "platform unreachable, retrying"
        note = f" · {html.escape(str(status['note']))}" if status.get("note") else ""
        self.status.value = (
            f'<b>{html.escape(self.run.name)}</b> <b style="color:{color}">{state}</b> '
            f"step {step}/{total or '?'}{eta}{note}{error}"
        )
        self.stop_button.disabled = state in ("completed", "failed", "stopped")

    def _update_picker(self) -> None:
        keys = sorted(self.series.points)
        if set(keys) - set(self.picker.options):
            chosen = [k for k in self.picker.value if k in keys]
            reward = reward_key(keys)
            if not chosen:
                chosen = [k for k in (reward, "loss") if k in keys]
            self.picker.options = keys
            self.picker.value = chosen

    def _redraw_chart(self) -> None:
        if self.figure is None:
            return
        chosen = list(self.picker.value)
        with self.figure.batch_update():
            for i, trace in enumerate(self.figure.data):
                if i < len(chosen):
                    xs, ys = self.series.points.get(chosen[i], ([], []))
                    trace.x, trace.y, trace.name, trace.visible = xs, ys, chosen[i], True
                else:
                    trace.visible = False

    def _request_stop(self) -> None:
        self.stop_button.disabled = True
        self.stop_button.description = "Stopping…"
        self.run.stop(wait=False)


def _make_figure() -> Any:
    try:
        import plotly.graph_objects as go

        fig = go.FigureWidget(
            layout={
                "height": 280,
                "width": 620,
                "margin": {"l": 40, "r": 40, "t": 10, "b": 30},
                "legend": {"orientation": "h"},
                "xaxis": {"title": "step"},
                "yaxis2": {"overlaying": "y", "side": "right"},
            }
        )
        for i in range(4):  # fixed slots; the picker chooses what they show
            fig.add_scatter(x=[], y=[], mode="lines", yaxis="y2" if i == 1 else "y", visible=False)
        return fig
    except ImportError:
        return None


def _metrics_table(row: dict[str, Any]) -> str:
    cells = "".join(
        f"<tr><td style='text-align:left'>{html.escape(k)}</td><td>{v:.5g}</td></tr>"
        for k, v in row.items()
        if isinstance(v, (int, float)) and k != "time"
    )
    return f"<details><summary>latest metrics (step {row.get('step')})</summary><table>{cells}</table></details>"


def _samples_table(samples: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{s.get('step', '')}</td>"
        f"<td style='text-align:left'><code>{html.escape(str(s.get('prompt', ''))[-80:])}</code></td>"
        f"<td style='text-align:left'><code>{html.escape(str(s.get('completion', ''))[:120])}</code></td>"
        f"<td>{s['reward']:.3f}</td></tr>"
        if isinstance(s.get("reward"), (int, float))
        else ""
        for s in reversed(samples)
    )
    return (
        "<b>latest samples</b><table><tr><th>step</th><th>prompt</th><th>completion</th><th>reward</th></tr>"
        f"{rows}</table>"
    )


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


# run directory -> the cell execution that last showed its monitor
_SHOWN_IN: dict[str, int] = {}


def show_monitor(run: Run) -> Monitor | None:
    """Display a run's monitor once per cell execution, following it while it runs."""
    shell = get_ipython()
    count = getattr(shell, "execution_count", None)
    if count is not None and _SHOWN_IN.get(str(run.dir)) == count:
        return None  # the magic already showed it; the displayhook must not show a second one
    if count is not None:
        _SHOWN_IN[str(run.dir)] = count
    settings = _settings(run)
    monitor = Monitor(
        run,
        refresh_seconds=settings.get("refresh_seconds", 0.5),
        metrics=tuple(settings.get("metrics", DEFAULT_METRICS)),
        max_points=settings.get("max_points", 2000),
    ).show()
    if not run.done:
        monitor.start()
    return monitor


def follow_in_cell(run: Run, *, wait: bool) -> Run:
    """Show a freshly launched run's monitor; with `wait`, block until it ends (Ctrl-C/interrupt
    stops the waiting, not the run)."""
    show_monitor(run)
    if wait:
        try:
            run.wait()
        except KeyboardInterrupt:
            print(f"stopped waiting; {run.name} keeps training (stop it with %prime_train --stop {run.name})")
    return run


def _settings(run: Run) -> dict[str, Any]:
    try:
        return dict((run.config.get("primenb") or {}).get("monitor") or {})
    except (OSError, ValueError):
        return {}
