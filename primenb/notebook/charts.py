"""The monitor's small multiples: which metrics each panel shows in each phase, and the plotly
figure that draws them (titled axes, no legend to overlap, no toolbar, one point = a marker)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from primenb.render.summary import reward_key

PANELS = 4  # fixed panels; the last one shows the metric picked in the search box
EVAL_LINES = 2  # eval sources drawn per panel (more sources: pick them in the search box)


@dataclass(frozen=True)
class Panel:
    title: str
    keys: tuple[str, ...]  # lines drawn (each on its own trace)
    band: str | None = None  # a std key: the first line's spread is drawn as a band around it


def _evals(keys: set[str], prefix: str = "") -> tuple[str, ...]:
    found = sorted(k for k in keys if k.startswith(prefix + "eval/") and k.endswith("/reward"))
    return tuple(found[:EVAL_LINES])


def panels(stage: str, keys: set[str], picked: str | None) -> list[Panel]:
    """The panels for ``stage`` (``"sft warmup"``, ``"rl"`` or ``"sft"``) given the metric keys seen."""
    if stage == "sft warmup":
        out = [
            Panel("SFT warm-up loss", ("warmup/loss",)),
            Panel("eval reward (warm-up)", _evals(keys, "warmup/")),
            Panel("warm-up token accuracy", ("warmup/mean_token_accuracy",)),
        ]
        default = "warmup/grad_norm"
    elif stage == "rl":
        reward = reward_key(keys) or "reward"
        band = "reward_std" if reward == "reward" else None
        out = [Panel("train reward (± std)", (reward,), band), Panel("eval reward", _evals(keys))]
        out.append(Panel("loss", ("loss",)))
        default = "grad_norm"
    else:
        out = [Panel("loss", ("loss",)), Panel("eval reward", _evals(keys))]
        out.append(Panel("token accuracy", ("mean_token_accuracy",)))
        default = "grad_norm"
    chosen = picked if picked in keys else default
    out.append(Panel(chosen or "(pick a metric)", (chosen,) if chosen else ()))
    return out


def stage_of(phase: str, mode: str | None, keys: set[str]) -> str | None:
    """Which panels to show: the warm-up's until the main phase has logged, then the mode's."""
    main = {k for k in keys if not k.startswith("warmup/")}
    if main - {"step", "time", "phase"}:
        return mode if mode in ("rl", "sft") else ("rl" if "reward" in main else "sft")
    if phase == "sft warmup" or any(k.startswith("warmup/") for k in keys):
        return "sft warmup"
    return None


def make_figure() -> Any:
    """A 2x2 plotly FigureWidget with fixed trace slots per panel, or None without plotly/anywidget."""
    try:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        titles = [" "] * PANELS  # placeholders: `draw` names the panels for the phase
        base = make_subplots(rows=2, cols=2, subplot_titles=titles, horizontal_spacing=0.12, vertical_spacing=0.2)
        fig = go.FigureWidget(base)
    except ImportError:
        return None
    fig.update_layout(
        height=420, width=760, showlegend=False, margin={"l": 50, "r": 20, "t": 30, "b": 40}, template="plotly_white"
    )
    fig._config = {"displayModeBar": False, "responsive": True}
    for i in range(PANELS):
        row, col = i // 2 + 1, i % 2 + 1
        if i == 0:  # the band: lower edge, upper edge filled down to it
            fig.add_scatter(x=[], y=[], mode="lines", line={"width": 0}, hoverinfo="skip", row=row, col=col)
            fig.add_scatter(
                x=[],
                y=[],
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                fillcolor="rgba(31,119,180,0.2)",
                hoverinfo="skip",
                row=row,
                col=col,
            )
        for _ in range(EVAL_LINES if i == 1 else 1):
            fig.add_scatter(x=[], y=[], mode="lines", row=row, col=col)
        fig.update_xaxes(title_text="step", row=row, col=col)
    return fig


def draw(fig: Any, layout: list[Panel], points: dict[str, tuple[list[float], list[float]]]) -> None:
    """Fill the figure's slots for ``layout`` from ``points`` (metric -> xs, ys)."""
    slots = iter(fig.data)
    with fig.batch_update():
        for i, panel in enumerate(layout):
            fig.layout.annotations[i].text = panel.title
            axis = fig.layout[f"yaxis{'' if i == 0 else i + 1}"]
            axis.title.text = panel.keys[0] if len(panel.keys) == 1 else "reward"
            if i == 0:
                lower, upper = next(slots), next(slots)
                _band(lower, upper, panel, points)
            for j in range(EVAL_LINES if i == 1 else 1):
                trace = next(slots)
                key = panel.keys[j] if j < len(panel.keys) else None
                xs, ys = points.get(key, ([], [])) if key else ([], [])
                trace.x, trace.y, trace.name = xs, ys, key or ""
                trace.mode = "markers" if len(xs) == 1 else "lines"


def _band(lower: Any, upper: Any, panel: Panel, points: dict[str, tuple[list[float], list[float]]]) -> None:
    mean = dict(zip(*points.get(panel.keys[0], ([], [])), strict=True)) if panel.keys else {}
    std = dict(zip(*points.get(panel.band, ([], [])), strict=True)) if panel.band else {}
    xs = [x for x in mean if x in std]
    lower.x, lower.y = xs, [mean[x] - std[x] for x in xs]
    upper.x, upper.y = xs, [mean[x] + std[x] for x in xs]


__all__ = ["PANELS", "Panel", "draw", "make_figure", "panels", "stage_of"]
