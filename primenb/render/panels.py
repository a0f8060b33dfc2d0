"""The small multiples of the live monitor and the static summary: which metrics each panel shows
in each phase (from the metrics table, `primenb.protocol.metrics`), each panel drawn as an SVG
chart by the one renderer (render/svgchart.py).

Not a plotly FigureWidget: a multi-axis FigureWidget sometimes comes up as one empty default plot
in JupyterLab (a front-end race, every time for a figure built while its box was hidden, as the
monitor's is until the first step). Plain HTML widgets holding SVG have no front-end state to lose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from primenb.protocol import metrics as M
from primenb.render.svgchart import line_chart

EVAL_LINES = 2  # eval sources drawn per panel (more sources: pick them in the search box)


@dataclass(frozen=True)
class Panel:
    title: str
    keys: tuple[str, ...]  # lines drawn (each on its own trace)
    band: str | None = None  # a std key: the first line's spread is drawn as a band around it
    # evals over the whole run: the warm-up's (``warmup/eval/...``), then the main phase's placed
    # after the warm-up's last step, one line per eval source, marked where GRPO starts
    combined: bool = False


# the monitor's panel widgets: the most panels a phase shows (from the metrics table), and one for
# the metric picked in the search box (4: e.g. train reward, eval reward, loss, grad_norm)
PANELS = max(len(M.panel_metrics(M.MONITOR, phase)) for phase in M.PHASES) + 1
Points = Mapping[str, tuple[Sequence[float], Sequence[float]]]
WHOLE_RUN_EVAL = "eval reward (warm-up, then GRPO)"


def _evals(keys: set[str], *, warm: bool = False) -> tuple[str, ...]:
    return tuple(M.eval_keys(keys, warm=warm)[:EVAL_LINES])


def _whole_run_evals(keys: set[str], counts: Mapping[str, int] | None) -> Panel | None:
    """The eval panel of a run with a warm-up, once it has two points to draw: the warm-up logs
    one eval (before it starts) and GRPO its first at its step 0 (the model the warm-up made), so a
    panel of the warm-up's evals alone was one point at 0 for the whole warm-up."""
    warm, main = _evals(keys, warm=True), _evals(keys)
    if not warm:
        return None
    points = sum((counts or {}).get(k, 1) for k in (*warm, *main))
    return Panel(WHOLE_RUN_EVAL, (*warm, *main), combined=True) if points >= 2 else None


def _main_evals(keys: set[str], counts: Mapping[str, int] | None) -> list[Panel]:
    """The eval panel of a run without a warm-up, once it has two points: a run shorter than its
    eval interval (or a short apply run) logs its step-0 eval alone, and a one-dot panel stood
    there for its whole life. Its value stays in the latest metrics."""
    keys_drawn = _evals(keys)
    points = sum((counts or {}).get(k, 2) for k in keys_drawn if k in keys)
    return [Panel("eval reward", keys_drawn)] if points >= 2 else []


def _panel(metric: M.Metric, stage: str, keys: set[str]) -> Panel:
    warm = stage == M.WARMUP
    key = M.first_present(metric, keys, warm=warm) or (M.warmup(metric.key) if warm else metric.key)
    band = metric.band if metric.band and key == metric.key else None  # an alias has no std of its own
    return Panel(M.label(key) + (" (± std)" if band else ""), (key,), band)


def panels(
    stage: str,
    keys: set[str],
    picked: str | None = None,
    counts: Mapping[str, int] | None = None,
    view: str = M.MONITOR,
) -> list[Panel]:
    """The panels of ``view`` (the live monitor's, or the static summary's: `M.SUMMARY`) for
    ``stage`` (``"sft warmup"``, ``"rl"`` or ``"sft"``) given the metric keys seen (and how many
    points each has, when known), from the metrics table (`primenb.protocol.metrics`): the
    phase's main metric, the evals, then its other metrics shown there. A panel whose metrics
    were never logged (no eval configured, no token accuracy) is left out rather than shown
    empty; the monitor's last panel shows the metric picked in the search box."""
    whole = _whole_run_evals(keys, counts)
    out: list[Panel] = []
    for metric in M.panel_metrics(view, stage):
        if metric.key == M.EVAL_REWARD:
            # the warm-up's evals alone are no panel (one point at 0): they join GRPO's
            out += [whole] if whole else ([] if stage == M.WARMUP else _main_evals(keys, counts))
        else:
            out.append(_panel(metric, stage, keys))
    out = [p for p in out if any(k in keys for k in p.keys)]  # a panel comes with its first point
    if view != M.MONITOR:
        return out
    defaults = [_panel(m, stage, keys).keys[0] for m in M.shown_in(M.PICK, stage)]
    default = next((k for k in defaults if k in keys), None)
    chosen = picked if picked in keys else default
    if chosen and all(chosen not in p.keys for p in out):
        out.append(Panel(chosen, (chosen,)))
    return out


def whole_run(points: Points, keys: Sequence[str]) -> tuple[dict[str, tuple[list[float], list[float]]], float | None]:
    """A combined panel's lines (one per eval source: its warm-up evals, then its main-phase evals
    shifted past the warm-up's last step) and where the main phase starts (None before it logged)."""
    warm_steps = [x for k, (xs, _) in points.items() if M.is_warmup_key(k) for x in xs]
    offset = max(warm_steps, default=0.0)
    lines: dict[str, tuple[list[float], list[float]]] = {}
    started = False
    for key in keys:
        if key not in points or not points[key][0]:
            continue
        xs, ys = points[key]
        main = not M.is_warmup_key(key)
        started = started or main
        name = M.bare(key)
        line = lines.setdefault(name, ([], []))
        line[0].extend(x + offset if main else x for x in xs)
        line[1].extend(ys)
    return lines, (offset if started else None)


def stage_of(phase: str, mode: str | None, keys: set[str]) -> str | None:
    """Which panels to show: the warm-up's until the main phase has logged, then the mode's."""
    # GRPO's step-0 eval comes alone for its whole first step (30-40 s): it joins the warm-up's
    # eval panel until GRPO logs a training metric, instead of a one-point panel of its own
    main = {k for k in keys if not M.is_warmup_key(k) and not M.is_eval_key(k)}
    if main - {"step", "time", "phase"}:
        return mode if mode in (M.RL, M.SFT) else (M.RL if M.first_present(M.main_metric(M.RL), main) else M.SFT)
    if phase == M.WARMUP or any(M.is_warmup_key(k) for k in keys):
        return M.WARMUP
    if any(M.is_eval_key(k) for k in keys):  # a run's step-0 eval, before its first step
        return mode if mode in (M.RL, M.SFT) else None
    return None


def panel_svg(
    panel: Panel, points: dict[str, tuple[list[float], list[float]]], width: int = 360, height: int = 190
) -> str:
    """One panel as an SVG chart (the renderer of the static summary): its lines on one y axis, the
    first line's spread as a band around it."""
    if panel.combined:
        lines, start = whole_run(points, panel.keys)
        marks = [(start, "GRPO")] if start is not None else []
        return line_chart(lines, title=panel.title, width=width, height=height, shared=True, marks=marks)
    series = {key: points[key] for key in panel.keys if key in points and points[key][0]}
    return line_chart(series, title=panel.title, width=width, height=height, shared=True, band=_band(panel, points))


def _band(
    panel: Panel, points: dict[str, tuple[list[float], list[float]]]
) -> tuple[list[float], list[float], list[float]] | None:
    if not panel.band or not panel.keys:
        return None
    mean = dict(zip(*points.get(panel.keys[0], ([], [])), strict=True))
    std = dict(zip(*points.get(panel.band, ([], [])), strict=True))
    xs = [x for x in mean if x in std]
    return xs, [mean[x] - std[x] for x in xs], [mean[x] + std[x] for x in xs]


__all__ = ["PANELS", "WHOLE_RUN_EVAL", "Panel", "panel_svg", "panels", "stage_of", "whole_run"]
