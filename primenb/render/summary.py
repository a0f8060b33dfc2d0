"""Static views of a run (HTML and text): what a saved notebook, nbconvert or a terminal shows."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from primenb.render.svgchart import line_chart

if TYPE_CHECKING:
    from primenb.run import Run

STATE_COLORS = {
    "queued": "#888",
    "running": "#1f77b4",
    "completed": "#2e7d32",
    "failed": "#c62828",
    "stopped": "#b26a00",
}


def reward_key(row_keys: Any) -> str | None:
    for key in ("reward", "rewards/mean", "train/reward"):
        if key in row_keys:
            return key
    return None


def headline(status: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """State, progress and the latest values of the metrics a person looks at first."""
    last = rows[-1] if rows else {}
    step = status.get("step") or last.get("step") or 0
    out: dict[str, Any] = {"state": status.get("state", "unknown"), "step": step, "max_steps": status.get("max_steps")}
    keys = {k for r in rows for k in r}
    wanted = ["reward", "loss"] + sorted(k for k in keys if k.startswith("eval/") and k.endswith("/reward"))
    if "reward" not in keys and "loss" not in keys:
        wanted += ["warmup/loss"]  # still in the SFT warm-up of an RL run
    for key in wanted:
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = values[-1]
    return out


def series(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, tuple[list[float], list[float]]]:
    out = {}
    for key in keys:
        pts = [(r["step"], r[key]) for r in rows if key in r and "step" in r]
        if pts:
            out[key] = ([p[0] for p in pts], [p[1] for p in pts])
    return out


def run_text(run: Run) -> str:
    status, rows = run.status, run.metric_rows()
    h = headline(status, rows)
    lines = [f"<primenb Run {run.name}: {h['state']}, step {h['step']}/{h['max_steps'] or '?'}>", f"  dir: {run.dir}"]
    lines += [f"  {k}: {v:.4g}" for k, v in h.items() if k not in ("state", "step", "max_steps")]
    if status.get("note"):
        lines.append(f"  {status['note']}")
    if status.get("error"):
        lines.append(f"  error: {status['error']}")
    return "\n".join(lines)


def run_html(run: Run) -> str:
    status, rows = run.status, run.metric_rows()
    h = headline(status, rows)
    color = STATE_COLORS.get(h["state"], "#888")
    total = h["max_steps"] or 0
    pct = min(100, 100 * h["step"] / total) if total else 0
    bar = (
        f'<div style="width:240px;height:8px;background:#eee;border-radius:4px;display:inline-block">'
        f'<div style="width:{pct:.0f}%;height:8px;background:{color};border-radius:4px"></div></div>'
    )
    values = " · ".join(
        f"{html.escape(k)} <b>{v:.4g}</b>" for k, v in h.items() if k not in ("state", "step", "max_steps")
    )
    reward = reward_key(rows[-1]) if rows else None
    charts = "".join(
        line_chart(series(rows, [key]), title=key)
        for key in ([reward] if reward else []) + ["loss"]
        if series(rows, [key])
    )
    note = f" · {html.escape(str(status['note']))}" if status.get("note") else ""
    error = ""
    if status.get("error"):
        tail = status.get("log_tail") or ""
        tail = "\n".join(tail) if isinstance(tail, list) else tail
        error = (
            f'<div style="color:#c62828">error: {html.escape(str(status["error"]))}</div>'
            f'<pre style="max-height:12em;overflow:auto;font-size:85%">{html.escape(tail)}</pre>'
        )
    return (
        f'<div class="primenb-run"><b>{html.escape(run.name)}</b> '
        f'<span style="color:{color};font-weight:bold">{html.escape(h["state"])}</span> '
        f"{bar} step {h['step']}/{total or '?'}{note}<div>{values}</div>"
        f'<div style="display:flex;gap:8px;flex-wrap:wrap">{charts}</div>{error}'
        f'<div style="color:#888;font-size:85%">{html.escape(str(run.dir))}</div></div>'
    )
