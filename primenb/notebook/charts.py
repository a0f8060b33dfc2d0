"""The monitor's small multiples: which metrics each panel shows in each phase, each panel drawn
as an SVG chart by the summary's renderer (render/svgchart.py).

Not a plotly FigureWidget: a multi-axis FigureWidget sometimes comes up as one empty default plot
in JupyterLab (a front-end race, every time for a figure built while its box was hidden, as the
monitor's is until the first step). Plain HTML widgets holding SVG have no front-end state to lose."""

from __future__ import annotations

from dataclasses import dataclass

from primenb.render.summary import reward_key
from primenb.render.svgchart import line_chart

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
    """The panels for ``stage`` (``"sft warmup"``, ``"rl"`` or ``"sft"``) given the metric keys seen:
    a panel whose metrics were never logged (no eval configured, no token accuracy) is left out
    rather than shown empty; the last panel shows the metric picked in the search box."""
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
    out = [p for p in out if any(k in keys for k in p.keys)]  # a panel comes with its first point
    chosen = picked if picked in keys else (default if default in keys else None)
    if chosen and all(chosen not in p.keys for p in out):
        out.append(Panel(chosen, (chosen,)))
    return out


def stage_of(phase: str, mode: str | None, keys: set[str]) -> str | None:
    """Which panels to show: the warm-up's until the main phase has logged, then the mode's."""
    main = {k for k in keys if not k.startswith("warmup/")}
    if main - {"step", "time", "phase"}:
        return mode if mode in ("rl", "sft") else ("rl" if "reward" in main else "sft")
    if phase == "sft warmup" or any(k.startswith("warmup/") for k in keys):
        return "sft warmup"
    return None


def panel_svg(panel: Panel, points: dict[str, tuple[list[float], list[float]]], width: int = 360) -> str:
    """One panel as an SVG chart (the renderer of the static summary): its lines on one y axis, the
    first line's spread as a band around it."""
    series = {key: points[key] for key in panel.keys if key in points and points[key][0]}
    return line_chart(series, title=panel.title, width=width, height=190, shared=True, band=_band(panel, points))


def _band(
    panel: Panel, points: dict[str, tuple[list[float], list[float]]]
) -> tuple[list[float], list[float], list[float]] | None:
    if not panel.band or not panel.keys:
        return None
    mean = dict(zip(*points.get(panel.keys[0], ([], [])), strict=True))
    std = dict(zip(*points.get(panel.band, ([], [])), strict=True))
    xs = [x for x in mean if x in std]
    return xs, [mean[x] - std[x] for x in xs], [mean[x] + std[x] for x in xs]


__all__ = ["PANELS", "Panel", "panel_svg", "panels", "stage_of"]
