"""`diff` (what differs between traces, as a table) and `compare` (metric curves overlaid)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.errors import PrimenbError
from primenb.protocol import metrics as M
from primenb.protocol.documents import EvalPoint, MetricsSummary, Steps
from primenb.render.svgchart import Figure
from primenb.traces import views as V
from primenb.traces.evals import column
from primenb.traces.trace import Trace, get, indexed_short_ids

if TYPE_CHECKING:
    import pandas as pd

ABSENT = "—"
# keys of the "trace" section whose values are trace ids
ID_KEYS = ("parent", "reproduces")
SECTIONS = ("trace", "config", "model", "environment", "data", "seeds", "deps", "hardware", "git", "env_vars", "evals")


def _resolve(refs: Sequence[Any], least: int) -> list[Trace]:
    if len(refs) < least:
        raise PrimenbError(f"give at least {least} traces (ids, id prefixes or run names)")
    traces = [get(r) for r in refs]
    if len({t.id for t in traces}) < len(traces):
        raise PrimenbError("the same trace was given twice")
    return traces


def _facets(t: Trace) -> dict[str, dict[str, Any]]:
    d = t.typed
    config = dict(t.config)
    config.pop("run", None)  # the run name differs by construction; shown under "trace"
    env: dict[str, Any] = {}
    data: dict[str, Any] = {}
    for kind, part in (d.data or {}).items():
        data[f"{kind}.hash"] = part.hash
        data[f"{kind}.examples"] = part.examples
        for src in part.sources or []:
            key = f"{kind}.{src.name}"
            env[f"{key}.id"] = src.env_id or src.dataset
            env[f"{key}.version"] = src.version
            for arg, value in V.flatten(src.args or {}).items():
                env[f"{key}.args.{arg}"] = value
            data[f"{key}.hash"] = src.hash
    model = {k: v for k, v in (d.model.to_dict() if d.model else {}).items() if k != "base"}
    model["finetune"] = (d.model_extra or {}).get("finetune")  # written by the engine, not declared
    for k, v in (d.adapter.to_dict() if d.adapter else {}).items():
        model[f"adapter.{k}"] = v
    return {
        "trace": {
            "name": t.name,
            "status": t.status,
            "mode": t.mode,
            "parent": t.parent,
            "reproduces": d.reproduces,
            "backend": d.backend,
            "host": d.host,
        },
        "config": V.flatten(config),
        "model": model,
        "environment": env,
        "data": data,
        "seeds": V.flatten(d.seeds or {}),
        "deps": dict(d.deps or {}),
        "hardware": V.flatten(d.hardware or {}),
        "git": dict(d.git or {}),
        "env_vars": dict((d.model_extra or {}).get("env_vars") or {}),
        "evals": _eval_facets(t),
    }


def _eval_facets(t: Trace) -> dict[str, Any]:
    """The latest ``%prime_eval`` per environment: its mean reward, n and temperature (the served
    model id differs by construction, and when it ran is not a difference between runs)."""
    out: dict[str, Any] = {}
    for e in t.latest_evals().items:
        out[f"{e.env}.mean"] = e.mean
        out[f"{e.env}.n"] = e.n
        out[f"{e.env}.temperature"] = e.temperature
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (dict, list)):
        from primenb.protocol.hashing import canonical_json

        return canonical_json(value)
    return repr(value) if isinstance(value, float) else str(value)  # exact: 1e-4 vs 1.0000001e-4


def _measured(value: Any) -> str:
    """A measured number to 4 significant digits (the diff falls back to the exact value when
    that would make two different values read the same)."""
    return f"{value:.4g}" if isinstance(value, float) else _cell(value)


class TraceDiff:
    """Key-by-key differences between traces: ``rows`` of ``(section, key, value per trace)``."""

    def __init__(self, traces: list[Trace]) -> None:
        self.traces = traces
        facets = [_facets(t) for t in traces]
        self.rows: list[tuple[str, str, list[str]]] = []
        for section in SECTIONS:
            keys: dict[str, None] = {}
            for f in facets:
                keys.update(dict.fromkeys(f[section]))
            for key in keys:
                values = [_cell(f[section][key]) if key in f[section] else ABSENT for f in facets]
                if len(set(values)) > 1:
                    if section == "evals":  # measured, not set: 0.1114, not 0.11141858141858144
                        short = [_measured(f[section][key]) if key in f[section] else ABSENT for f in facets]
                        values = short if len(set(short)) == len(set(values)) else values
                    self.rows.append((section, key, values))

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.traces]

    def sections(self) -> list[str]:
        return list(dict.fromkeys(r[0] for r in self.rows))

    def section(self, name: str) -> dict[str, list[str]]:
        return {k: v for s, k, v in self.rows if s == name}

    @property
    def df(self) -> pd.DataFrame:
        import pandas as pd

        cols = [f"{t.id} {t.name}" for t in self.traces]
        return pd.DataFrame([[s, k, *v] for s, k, v in self.rows], columns=["section", "key", *cols])

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        head = f"<primenb TraceDiff {' vs '.join(self.ids)}: {len(self.rows)} difference(s)>"
        if not self.rows:
            return head
        header = ["section", "key", *[f"{t.id} {t.name}"[:30] for t in self.traces]]
        return head + "\n" + V.text_table(header, [[s, k, *v] for s, k, v in self.rows], max_width=40)

    def _repr_html_(self) -> str:
        # ids as the trace table shows them: the short prefix, the full id on hover
        linked = [v for s, k, vs in self.rows if s == "trace" and k in ID_KEYS for v in vs]
        short = indexed_short_ids([*self.ids, *linked])
        labels = [f"{V.id_html(t.id, short)} {V.esc(t.name)}" for t in self.traces]
        title = " vs ".join(f"<b>{V.id_html(t.id, short)}</b> {V.esc(t.name)}" for t in self.traces)
        if not self.rows:
            return f"<div>{title}: no differences in config, data, environment, deps, hardware or evals</div>"
        header = ["section", "key", *labels]
        body = []
        last = None
        for s, k, v in self.rows:
            cells = [V.id_html(x, short) if s == "trace" and k in ID_KEYS else V.esc(x) for x in v]
            body.append([f"<b>{V.esc(s)}</b>" if s != last else "", V.esc(k), *cells])
            last = s
        counts = ", ".join(f"{s}: {sum(1 for r in self.rows if r[0] == s)}" for s in self.sections())
        return (
            f'<div class="primenb-diff"><div>{title}: {len(self.rows)} difference(s) ({counts})</div>'
            f"{V.table(header, body, raw=True, raw_header=True)}</div>"
        )


def diff(*refs: Any) -> TraceDiff:
    """Differences between two or more traces: config key by key, model, environment, data
    hashes, seeds, dependency versions, hardware, git, environment variables and the latest
    ``%prime_eval`` per environment (mean reward, n, temperature)."""
    return TraceDiff(_resolve(refs, 2))


# ---------------------------------------------------------------------------------------------
# compare


def default_metrics(rows_by_trace: list[list[dict[str, Any]]]) -> list[str]:
    keys: dict[str, None] = {}
    for rows in rows_by_trace:
        for r in rows:
            keys.update(dict.fromkeys(r))
    out = M.curve_keys(keys)  # the metrics table's chart metrics: train reward, eval rewards, loss
    return out or [k for k in keys if k not in ("step", "time")][:1]


class Comparison:
    """Metric curves of several traces overlaid (``figure``: SVG charts, `primenb.render.svgchart`)
    and a summary table (with the latest ``%prime_eval`` mean reward per environment,
    ``eval:<env>``)."""

    def __init__(self, traces: list[Trace], metrics: Sequence[str] | None = None) -> None:
        self.traces = traces
        self.rows = [t.metric_rows() for t in traces]
        self.evals = [t.latest_evals().by_env() for t in traces]
        self.eval_envs = sorted({env for by_env in self.evals for env in by_env})
        self.metrics = list(metrics) if metrics else default_metrics(self.rows)
        missing = [m for m in self.metrics if not any(m in r for rows in self.rows for r in rows)]
        if missing:
            raise PrimenbError(
                f"no trace logged {', '.join(missing)}; logged metrics include: {', '.join(default_metrics(self.rows))}"
            )

    def series(self, metric: str, ids: dict[str, str] | None = None) -> dict[str, list[tuple[int, float]]]:
        """``label -> (step, value)`` per trace; the label is the id (as mapped by ``ids``) and name."""
        return {
            f"{(ids or {}).get(t.id, t.id)} {t.name}": [
                (r["step"], r[metric]) for r in rows if metric in r and isinstance(r.get("step"), int)
            ]
            for t, rows in zip(self.traces, self.rows, strict=True)
        }

    @property
    def title(self) -> str:
        """The chart's title: the runs' names (the legend pairs each id with its name; a title of
        ids alone said nothing)."""
        return "compare: " + " vs ".join(t.name or t.id for t in self.traces)

    def figure_of(self, ids: dict[str, str] | None = None, *, width: int = 360, height: int = 180) -> Figure:
        """A chart per metric, one line per trace in the same colour in every chart (its legend
        pairs the id, as mapped by ``ids``, with the name), drawn by the one SVG renderer."""
        labels = list(self.series(self.metrics[0], ids)) if self.metrics else []
        colors = {label: V.COLORS[j % len(V.COLORS)] for j, label in enumerate(labels)}
        charts = [
            (m, V.svg_chart(self.series(m, ids), title=m, width=width, height=height, colors=colors))
            for m in self.metrics
        ]
        return Figure(self.title, [(m, svg) for m, svg in charts if svg])

    @property
    def figure(self) -> Figure:
        """The overlaid curves (`figure_of` with full ids)."""
        return self.figure_of()

    def write_html(self, path: str | os.PathLike[str]) -> Path:
        """The curves and the summary table as a standalone page (``compare --html FILE``)."""
        figure = self.figure_of(width=640, height=260)
        figure.charts.append(("summary", self._summary_html()))
        return figure.write_html(path)

    def summary_rows(self) -> list[dict[str, Any]]:
        out = []
        for t, evals in zip(self.traces, self.evals, strict=True):
            d = t.typed
            m = d.metrics or MetricsSummary()
            best, final, steps = m.best_eval or EvalPoint(), m.final_eval or EvalPoint(), d.steps or Steps()
            out.append(
                {
                    "trace": t.id,
                    "name": t.name,
                    "parent": t.parent,
                    "status": t.status,
                    "mode": t.mode,
                    "model": d.model.id if d.model else None,
                    "steps": f"{steps.start or 0}→{steps.last}",
                    "final reward": m.final_reward,
                    "final eval": final.value,
                    "best eval": best.value,
                    "best eval step": best.step,
                    "final loss": m.final_loss,
                    "duration": V.fmt_duration(d.duration_s),
                    # the latest %prime_eval mean reward per environment (as the traces table)
                    **{column(env): evals[env].mean if env in evals else None for env in self.eval_envs},
                }
            )
        return out

    @property
    def summary(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.summary_rows())

    def _short_ids(self) -> dict[str, str]:
        return indexed_short_ids([t.id for t in self.traces] + [t.parent for t in self.traces])

    def _summary_html(self, short: dict[str, str] | None = None) -> str:
        """The summary table; trace and parent ids short, the full id on hover (as the trace table)."""
        short = self._short_ids() if short is None else short
        rows = self.summary_rows()
        header = list(rows[0]) if rows else []
        cells = [
            [
                V.id_html(v, short) if k in ("trace", "parent") and isinstance(v, str) else V.esc(V.fmt(v))
                for k, v in r.items()
            ]
            for r in rows
        ]
        return V.table(header, cells, raw=True)

    def _repr_html_(self) -> str:
        short = self._short_ids()  # chart legends name traces by short id too; the table has the full one
        return f'<div class="primenb-compare">{self.figure_of(short).html()}{self._summary_html(short)}</div>'

    def __repr__(self) -> str:
        rows = self.summary_rows()
        header = list(rows[0]) if rows else []
        return (
            f"<primenb Comparison of {len(self.traces)} traces; metrics: {', '.join(self.metrics)}>\n"
            + V.text_table(header, [list(r.values()) for r in rows])
        )


def compare(*refs: Any, metrics: Sequence[str] | None = None) -> Comparison:
    """Overlay the metric curves of two or more traces (default: train reward, eval reward, loss)."""
    return Comparison(_resolve(refs, 1), metrics)


__all__ = ["Comparison", "TraceDiff", "compare", "diff"]
