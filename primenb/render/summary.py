"""Static views of a run (HTML and text): what a saved notebook, nbconvert or a terminal shows."""

from __future__ import annotations

import html
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.protocol import metrics as M
from primenb.protocol.documents import StatusDoc, typed
from primenb.protocol.rundir import FINAL_STATES, State
from primenb.render import panels as P
from primenb.render.phase import duration, phase_line, progress
from primenb.render.svgchart import ERROR, GRID, MUTED, STATE_COLORS

if TYPE_CHECKING:
    from primenb.run import Run


def headline(status: Mapping[str, Any] | StatusDoc, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """State, progress and the latest values of the metrics a person looks at first."""
    doc = typed(StatusDoc, status)
    last = rows[-1] if rows else {}
    step = doc.step or last.get("step") or 0
    out: dict[str, Any] = {"state": _state(status, doc), "step": step, "max_steps": doc.max_steps}
    # the main metrics and eval rewards (the warm-up's main metric while only the warm-up logged)
    for key in M.headline_keys({k for r in rows for k in r}):
        values = [r[key] for r in rows if key in r]
        if values:
            out[key] = values[-1]
    return out


# the folder paths are shown from while `paths_from` runs (else this process's working folder)
_FOLDER: ContextVar[Path | None] = ContextVar("primenb_paths_from", default=None)


@contextmanager
def paths_from(folder: Path) -> Iterator[None]:
    """Show paths relative to ``folder`` inside the block: the notebook's own folder when the
    Jupyter server renders a notebook's snapshots (its working folder is the server's root, and
    a kernel's is its notebook's)."""
    token = _FOLDER.set(folder)
    try:
        yield
    finally:
        _FOLDER.reset(token)


def short_path(path: str | os.PathLike[str] | None) -> str:
    """A path fit for a saved notebook: relative to the working folder (`paths_from`'s inside
    it), or ``~/...``, or (outside both) the last three parts after an ellipsis; never the
    absolute path."""
    if not path:
        return ""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    for base, shown in ((_FOLDER.get() or Path.cwd(), ""), (Path.home(), "~/")):
        try:
            rel = p.resolve().relative_to(base.resolve())
        except (ValueError, OSError):
            continue
        return f"{shown}{rel}" if str(rel) != "." else (shown.rstrip("/") or ".")
    return "…/" + "/".join(p.parts[-3:])


def _rl_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The main phase's rows (not the SFT warm-up's, which have their own step count)."""
    return [r for r in rows if not M.is_warmup_row(r)]


def eval_keys(rows: list[dict[str, Any]]) -> list[str]:
    return M.eval_keys({k for r in rows for k in r})


@dataclass
class Ending:
    """The facts a finished (or interrupted) run ends with."""

    state: str
    step: int
    max_steps: int | None
    wall_s: float | None
    evals: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # key -> final, best, best step
    tokens_per_s: float | None = None
    checkpoint: str = ""
    trace_id: str = ""
    error: str = ""
    next_commands: list[str] = field(default_factory=list)


def _state(status: Mapping[str, Any] | StatusDoc, doc: StatusDoc) -> State:
    """The run's state; `State.UNKNOWN` when it records none this primenb reads."""
    return doc.state or State.of(None if isinstance(status, StatusDoc) else status.get("state"))


def _wall(status: StatusDoc) -> float | None:
    if status.wall_s is not None:
        return float(status.wall_s)
    try:
        fmt = "%Y-%m-%dT%H:%M:%S%z"
        t0, t1 = status.started_at, status.ended_at
        if t0 and t1:
            return (datetime.strptime(str(t1), fmt) - datetime.strptime(str(t0), fmt)).total_seconds()
    except ValueError:
        pass
    return None


def ending(
    run: Run, status: Mapping[str, Any] | StatusDoc | None = None, rows: list[dict[str, Any]] | None = None
) -> Ending:
    raw = run.status if status is None else status
    doc = typed(StatusDoc, raw)
    rows = _rl_rows(run.metric_rows() if rows is None else rows)
    step = int(doc.step or (rows[-1]["step"] if rows else 0))
    evals = {}
    for key in eval_keys(rows):
        pts = [(r[key], r["step"]) for r in rows if key in r]
        best = max(pts, key=lambda p: p[0])
        evals[key] = (pts[-1][0], best[0], best[1])
    speeds = [r[M.TOKENS_PER_S] for r in rows if isinstance(r.get(M.TOKENS_PER_S), (int, float))]
    trace_id = str(doc.trace_id or "")
    checkpoint = short_path(doc.final_checkpoint or doc.last_checkpoint)
    state = _state(raw, doc)
    steps = int(doc.max_steps or step or 1)
    nxt = []
    if state not in FINAL_STATES:
        nxt.append(f"%prime_train --attach {run.name}")
    elif trace_id and checkpoint and step > 0:  # a run stopped in its warm-up trained nothing to go on from
        nxt.append(f"%prime_harness apply {trace_id} --steps {steps}")
        nxt.append(f'primenb.generate("{trace_id}", "your prompt")')
    if state == State.FAILED:
        nxt.append(f'primenb.attach("{run.name}").logs()')
    return Ending(
        state=state,
        step=step,
        max_steps=doc.max_steps,
        wall_s=_wall(doc),
        evals=evals,
        tokens_per_s=sum(speeds) / len(speeds) if speeds else None,
        checkpoint=checkpoint,
        trace_id=trace_id,
        error=str(doc.error or ""),
        next_commands=nxt,
    )


def ending_lines(e: Ending) -> list[str]:
    """The ending as short ``label: value`` lines (text view, and the facts of the HTML one)."""
    lines = [f"steps: {e.step}/{e.max_steps or '?'}"]
    if e.wall_s is not None:
        lines.append(f"wall time: {duration(e.wall_s)}")
    for key, (final, best, best_step) in e.evals.items():
        lines.append(f"{key}: final {final:.4g}, best {best:.4g} (step {best_step})")
    if e.tokens_per_s is not None:
        lines.append(f"tokens/s: {e.tokens_per_s:.4g}")
    if e.checkpoint:
        lines.append(f"checkpoint: {e.checkpoint}")
    if e.trace_id:
        lines.append(f"trace: {e.trace_id}")
    return lines


def run_text(run: Run) -> str:
    status, rows = run.status, run.metric_rows()
    p = progress(status)
    now = phase_line(p) if p.state in FINAL_STATES else f"{p.state}, {phase_line(p)}"
    lines = [f"<primenb Run {run.name}: {now}>", f"  dir: {short_path(run.dir)}"]
    if p.state in FINAL_STATES:
        e = ending(run, status, rows)
        lines += [f"  {line}" for line in ending_lines(e)]
        lines += [f"  next: {c}" for c in e.next_commands]
    else:
        h = headline(status, rows)
        lines += [f"  {k}: {v:.4g}" for k, v in h.items() if k not in ("state", "step", "max_steps")]
    doc = typed(StatusDoc, status)
    if note := status_note(doc):
        lines.append(f"  {note}")
    if doc.error:
        lines.append(f"  error: {doc.error}")
    return "\n".join(lines)


def charts_html(rows: list[dict[str, Any]]) -> str:
    """Static small multiples: the live monitor's panels (`primenb.render.panels`) for the
    summary's metrics (the metrics table's ``summary`` view), the warm-up's before the main
    phase's: SFT warm-up loss, train reward (± std), eval reward, loss (those with data). The eval
    panel runs over the whole run: the warm-up's evals, then the main phase's (its steps placed
    after the warm-up's), so a rise during the warm-up is not hidden."""
    points: dict[str, tuple[list[float], list[float]]] = {}
    for r in rows:
        for key, value in r.items():
            if key not in ("step", "time") and isinstance(value, (int, float)) and isinstance(r.get("step"), int):
                line = points.setdefault(key, ([], []))
                line[0].append(r["step"])
                line[1].append(value)
    keys = set(points)
    counts = {key: len(xs) for key, (xs, _) in points.items()}
    stage = P.stage_of("", None, keys)
    if stage is None:
        return ""
    shown = []
    if stage != M.WARMUP:  # the warm-up's own panels first; its evals are in the main phase's eval panel
        shown = [p for p in P.panels(M.WARMUP, keys, counts=counts, view=M.SUMMARY) if not p.combined]
    shown += P.panels(stage, keys, counts=counts, view=M.SUMMARY)
    return "".join(
        f'<div class="primenb-chart">{P.panel_svg(panel, points, width=300, height=160)}</div>' for panel in shown
    )


def command_html(command: str) -> str:
    """A command as code that wraps between its words only: a narrow output broke
    ``%prime_train --attach`` after "--" (browsers break after a hyphen)."""
    words = (f'<span style="white-space:nowrap">{html.escape(w)}</span>' for w in command.split(" "))
    return f'<code class="primenb-command">{" ".join(words)}</code>'


# a sample's text wraps anywhere inside its cell: a long completion (no spaces in reversed text)
# pushed the table past a 448 px output area
_CELL = "text-align:left;overflow-wrap:anywhere;word-break:break-word"


def samples_html(samples: list[dict[str, Any]], n: int = 4) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(str(s.get('step', '')))}</td>"
        f"<td style='{_CELL}'><code>{html.escape(str(s.get('prompt', ''))[-60:])}</code></td>"
        f"<td style='{_CELL}'><code>{html.escape(str(s.get('completion', ''))[:100])}</code></td>"
        f"<td>{s['reward']:.3f}</td></tr>"
        if isinstance(s.get("reward"), (int, float))
        else ""
        for s in list(reversed(samples))[:n]
    )
    if not rows:
        return ""
    return (
        '<div class="primenb-samples" style="max-width:100%;overflow-x:auto"><b>last samples</b>'
        '<table style="table-layout:fixed;width:100%"><tr><th style="width:3em">step</th>'
        '<th style="text-align:left">prompt</th><th style="text-align:left">completion</th>'
        '<th style="width:4em">reward</th></tr>'
        f"{rows}</table></div>"
    )


# a warm tint over the theme's own background, in the theme's own text colour: readable (WCAG AA)
# in the light and the dark theme alike
WARNING_STYLE = (
    "background:rgba(255,152,0,0.14);border-left:4px solid var(--jp-warn-color1, #b26a00);"
    "color:var(--jp-content-font-color1, rgba(0,0,0,0.87));padding:4px 8px;margin:4px 0"
)


def status_note(status: StatusDoc) -> str:
    """A remote backend's line (queue position, cost, "platform unreachable, retrying"): a field
    the status documents do not declare, so it is read as it is."""
    note = (status.model_extra or {}).get("note")
    return str(note) if note else ""


def status_warnings(status: Mapping[str, Any] | StatusDoc) -> list[str]:
    """The engine's own warnings from ``status.json`` (a tracker that failed), bounded: the file
    is read tolerantly, but a run directory is still another process's output."""
    found = typed(StatusDoc, status).warnings or []
    return [w if len(w) <= 400 else w[:397] + "..." for w in found[-8:]]


def warnings_html(messages: list[str]) -> str:
    return "".join(f'<div class="primenb-warning" style="{WARNING_STYLE}">⚠ {html.escape(m)}</div>' for m in messages)


def run_html(
    run: Run, *, samples: list[dict[str, Any]] | None = None, raw_rows: list[dict[str, Any]] | None = None
) -> str:
    """The static view of a run: the phase line and bar, and once it ended its summary (final and
    best eval, steps, wall time, tokens/s, checkpoint, trace id, next commands), SVG charts, the
    last samples and any warnings. No absolute path: it is what a saved notebook keeps."""
    from primenb.protocol.rundir import read_jsonl
    from primenb.render.health import check

    status, rows = run.status, run.metric_rows()
    raw = list(read_jsonl(run.files.metrics_path)) if raw_rows is None else raw_rows
    if samples is None:
        samples = list(read_jsonl(run.files.samples_path))[-8:]
    p = progress(status)
    color = STATE_COLORS.get(p.state, "#888")
    bar = (
        f'<div style="width:240px;height:8px;background:{GRID};border-radius:4px;display:inline-block">'
        f'<div style="width:{100 * p.fraction:.0f}%;height:8px;background:{color};border-radius:4px"></div></div>'
    )
    body = ""
    if p.state in FINAL_STATES:
        e = ending(run, status, rows)
        facts = "".join(f"<li>{html.escape(line)}</li>" for line in ending_lines(e))
        nxt = "".join(f"<li>{command_html(c)}</li>" for c in e.next_commands)
        body = f'<ul class="primenb-facts" style="margin:4px 0">{facts}</ul>' + (
            f'<div class="primenb-next"><b>next</b><ul style="margin:2px 0">{nxt}</ul></div>' if nxt else ""
        )
    else:
        h = headline(status, rows)
        values = " · ".join(
            f"{html.escape(k)} <b>{v:.4g}</b>" for k, v in h.items() if k not in ("state", "step", "max_steps")
        )
        body = (
            f'<div>{values}</div><div class="primenb-next">follow it live: '
            f"{command_html(f'%prime_train --attach {run.name}')}</div>"
        )
    doc = typed(StatusDoc, status)
    note = f" · {html.escape(status_note(doc))}" if status_note(doc) else ""
    error = ""
    if doc.error:
        tail = "\n".join(doc.log_tail or [])
        error = (
            f'<div style="color:{ERROR}">error: {html.escape(doc.error)}</div>'
            f'<pre style="max-height:12em;overflow:auto;font-size:85%">{html.escape(tail)}</pre>'
        )
    warnings = warnings_html(check(raw) + status_warnings(status))  # the metrics' and the engine's own
    # not "primenb-run": the sidebar's stylesheet (loaded on every page) places its list rows,
    # class primenb-run, absolutely in 36 px, and so hid the whole summary in notebook outputs
    return (
        f'<div class="primenb-summary" data-state="{html.escape(p.state)}"><b>{html.escape(run.name)}</b> '
        f'<span style="color:{color};font-weight:bold">{html.escape(p.state)}</span> {bar} '
        f'<span class="primenb-phase">{html.escape(phase_line(p))}</span>{note}{body}{warnings}'
        f'<div style="display:flex;gap:8px;flex-wrap:wrap">{charts_html(rows)}</div>{samples_html(samples)}{error}'
        f'<div style="color:{MUTED};font-size:85%">{html.escape(short_path(run.dir))}</div></div>'
    )
