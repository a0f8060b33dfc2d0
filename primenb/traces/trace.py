"""`Trace`: one run's trace (``RUN_DIR/trace.json``), found by id, id prefix, run name or folder."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from primenb.errors import PrimenbError
from primenb.protocol import metrics as M
from primenb.protocol.documents import EvalPoint, MetricsSummary, Reproduction, SampleRow, State, Steps, TraceDoc, typed
from primenb.protocol.fields import Mode
from primenb.protocol.privacy import trace_denies
from primenb.protocol.reader import is_regular
from primenb.protocol.record import TRACE_FILE, read_trace, reconcile
from primenb.protocol.rundir import RunDir, read_jsonl, read_metrics
from primenb.traces import views as V
from primenb.traces.evals import Evals, LatestEval, read_evals

if TYPE_CHECKING:
    import pandas as pd

    from primenb.protocol.index import Index
    from primenb.run import Run

SAMPLES_SHOWN = 6


def steps_text(steps: Steps | Mapping[str, Any] | None, live_step: int | None = None) -> str:
    """``0 → 30 (max 30)``; a live run's ``0 → 12 so far (max 60)``, never ``0 → None``; an ended
    run that trained no step (stopped in its SFT warm-up) ``no step trained``, not ``0 → 0``."""
    steps = typed(Steps, steps)
    start, last = steps.start or 0, steps.last
    if last is None and isinstance(live_step, int) and not isinstance(live_step, bool):
        text = f"{start} → {live_step} so far"
    elif last is not None and last == start:
        text = f"no step trained after step {last}" if last else "no step trained"
    else:
        text = f"{start} → {last if last is not None else 'not started'}"
    return text + (f" (max {steps.max})" if steps.max is not None else "")


class TraceNotFound(PrimenbError):
    pass


class Trace:
    """A run's trace: what was trained, on what, with what, and how it did.

    ``doc`` is the trace.json content; ``typed`` the same as a `TraceDoc` (what this module reads
    fields from: mypy sees a renamed field); ``run_dir`` the folder it lives in (the source of truth).
    """

    def __init__(self, doc: dict[str, Any], run_dir: str | os.PathLike[str]) -> None:
        self.doc = doc
        self.run_dir = Path(run_dir)
        self.files = RunDir(self.run_dir)

    @property
    def doc(self) -> dict[str, Any]:
        return self._doc

    @doc.setter
    def doc(self, doc: dict[str, Any]) -> None:
        self._doc = doc
        self.typed: TraceDoc = typed(TraceDoc, doc)

    @classmethod
    def load(cls, run_dir: str | os.PathLike[str]) -> Trace:
        doc = read_trace(run_dir)
        if doc is None:
            raise TraceNotFound(f"{run_dir} has no readable {TRACE_FILE}")
        reconcile(doc, Path(run_dir))
        return cls(doc, run_dir)

    # -- fields -----------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self.doc["trace_id"])

    @property
    def name(self) -> str:
        return str(self.typed.name or self.run_dir.name)

    @property
    def parent(self) -> str | None:
        return self.typed.parent

    @property
    def state(self) -> State | None:
        """The run's `State` as the trace records it; None when unknown. (`Run.state` is the same
        for a `Run`; `Run.status` is the whole status.json document.)"""
        return self.typed.status

    @property
    def status(self) -> str:
        """The state as text, `State.UNKNOWN`'s when the trace records none (kept for compatibility:
        `state` is the typed one)."""
        return str(self.state or State.UNKNOWN)

    @property
    def mode(self) -> Mode | None:
        return cast("Mode | None", self.typed.mode)  # written from the config's mode: "rl" or "sft"

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.typed.config or {})

    @property
    def model(self) -> dict[str, Any]:
        return self.typed.model.to_dict() if self.typed.model else {}

    @property
    def fingerprint(self) -> str | None:
        return self.typed.model.fingerprint if self.typed.model else None

    @property
    def data(self) -> dict[str, Any]:
        return {kind: part.to_dict() for kind, part in (self.typed.data or {}).items()}

    @property
    def summary(self) -> dict[str, Any]:
        return self.typed.metrics.to_dict() if self.typed.metrics else {}

    @property
    def last_step(self) -> int | None:
        return self.typed.steps.last if self.typed.steps else None

    @property
    def final_checkpoint(self) -> Path | None:
        final = self.typed.final
        return Path(final.path) if final and final.path else None

    @property
    def run(self) -> Run:
        from primenb.run import Run

        return Run(self.run_dir)

    def __getitem__(self, key: str) -> Any:
        return self.doc[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)

    def metric_rows(self) -> list[dict[str, Any]]:
        return read_metrics(self.files.metrics_path)  # objects with an int step, numbers only

    @property
    def metrics(self) -> pd.DataFrame:
        """One row per (phase, step), as `Run.metrics` (`primenb.render.tidy.metrics_frame`)."""
        from primenb.render.tidy import metrics_frame

        return metrics_frame(read_jsonl(self.files.metrics_path))

    def sample_rows(self) -> list[dict[str, Any]]:
        return list(read_jsonl(self.files.samples_path))

    @property
    def samples(self) -> pd.DataFrame:
        """Sampled completions, as `Run.samples` (`primenb.render.tidy.samples_frame`)."""
        from primenb.render.tidy import samples_frame

        return samples_frame(self.sample_rows())

    def latest_evals(self) -> Evals:
        """The latest ``%prime_eval`` per environment stored with the trace (``evals/<env>.json``);
        unreadable files are left out and named in ``.warnings``."""
        return read_evals(self.run_dir)

    @property
    def evals(self) -> pd.DataFrame:
        """One row per evaluated environment: its latest eval's mean reward, 95 % interval, n,
        temperature, when and the served model id."""
        import pandas as pd

        rows = [e.as_dict() for e in self.latest_evals().items]
        cols = ["env", "mean", "std", "ci95_low", "ci95_high", "n", "temperature", "created", "model"]
        frame = pd.DataFrame(rows, columns=cols)
        frame["created"] = pd.to_datetime(frame["created"], unit="s", errors="coerce")
        return frame

    def refresh(self) -> Trace:
        fresh = Trace.load(self.run_dir)
        self.doc = fresh.doc
        return self

    # -- lineage ----------------------------------------------------------------------------
    def lineage(self, index: Index | None = None) -> list[dict[str, Any]]:
        """The parent chain, oldest first, ending with this trace: ``{"trace", "name", "status",
        "steps", "missing"}`` per entry (``missing``: a parent no longer indexed)."""
        chain = [self._entry()]
        seen = {self.id}
        parent = self.parent
        while parent and parent not in seen and len(chain) < 100:
            seen.add(parent)
            try:
                t = get(parent, index=index)
            except PrimenbError:
                chain.append({"trace": parent, "name": None, "status": None, "steps": None, "missing": True})
                break
            chain.append(t._entry())
            parent = t.parent
        return chain[::-1]

    def children(self, index: Index | None = None) -> list[tuple[str, str]]:
        from primenb.protocol.index import Index

        rows = (index or Index()).query("SELECT trace, name FROM traces WHERE parent = ? ORDER BY created", (self.id,))
        return [(r[0], r[1]) for r in rows]

    def _entry(self) -> dict[str, Any]:
        steps = self.typed.steps or Steps()
        return {
            "trace": self.id,
            "name": self.name,
            "status": self.status,
            "steps": (steps.start, steps.last),
            "missing": False,
        }

    # -- display ----------------------------------------------------------------------------
    def headline(self, live_step: int | None = None) -> dict[str, Any]:
        """The trace's facts, one line each; ``live_step``: a running run's step from status.json
        (the trace records its last step only when the run ends)."""
        d = self.typed
        m = d.metrics or MetricsSummary()
        adapter, best, final = d.adapter, m.best_eval, m.final_eval
        return {
            "trace": self.id,
            "name": self.name,
            "status": self.status,
            "mode": (self.mode or "").upper(),
            "model": d.model.id if d.model else None,
            "fingerprint": self.fingerprint,
            "fine-tune": (
                f"LoRA rank {adapter.rank}, alpha {fmt_num(adapter.alpha)}, targets {V.fmt(adapter.target_modules)}"
                if adapter and adapter.to_dict()
                else "full"
            ),
            "steps": steps_text(d.steps, live_step),
            "final reward": m.final_reward,
            "final eval": _eval_point(final),
            "best eval": _eval_point(best),
            "final loss": m.final_loss,
            "created": d.created_at,
            "duration": V.fmt_duration(d.duration_s),
            "backend": d.backend,
            "host": d.host,
            "run dir": str(self.run_dir),
            "final checkpoint": d.final.path if d.final else None,
        }

    def __repr__(self) -> str:
        h = self.headline()
        lines = [f"<primenb Trace {self.id} {self.name}: {self.status}>"]
        lines += [f"  {k:>16}: {V.fmt(v)}" for k, v in _shown(h).items()]
        chain = self.lineage()
        if len(chain) > 1:
            lines.append("  " + "lineage".rjust(16) + ": " + " → ".join(e["trace"] for e in chain))
        r = self.typed.reproduction
        if r and r.to_dict():
            lines.append(f"  {'reproduces':>16}: {r.of} (metrics match: {V.fmt(r.metrics_match)})")
        if self.typed.error:
            lines.append(f"  {'error':>16}: {self.typed.error}")
        for e in self.latest_evals().items:
            lines.append(f"  {'eval':>16}: {e.env} {e.line()}")  # the latest %prime_eval there
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return trace_html(self)


def _eval_point(point: EvalPoint | None) -> str | None:
    """``0.8 at step 30``; None when the trace records no such eval."""
    return f"{V.fmt(point.value)} at step {point.step}" if point and point.to_dict() else None


def _shown(h: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in h.items() if k not in ("trace", "name", "status") and v not in (None, "")}


def fmt_num(v: Any) -> str:
    return V.fmt(v)


def indexed_short_ids(ids: Iterable[str | None], index: Index | None = None) -> dict[str, str]:
    """Each id -> its shortest unique prefix among every indexed trace (and ``ids``): the prefix
    `%prime_harness show PREFIX` opens, so every view shows the same short id as the table."""
    from primenb.protocol.index import Index

    wanted = [i for i in ids if isinstance(i, str)]
    universe = [r[0] for r in (index or Index()).query("SELECT trace FROM traces")]
    return V.short_ids(wanted, [*universe, *wanted])


def trace_html(t: Trace) -> str:
    d = t.typed
    chain = t.lineage()
    kids = t.children()
    repro = d.reproduction if d.reproduction and d.reproduction.to_dict() else None
    short = indexed_short_ids([t.id, *(e["trace"] for e in chain), *(k for k, _ in kids), repro.of if repro else None])
    parts = [
        f'<div class="primenb-trace"><div style="font-size:14px"><b>trace {V.id_html(t.id, short)}</b> '
        f"{V.esc(t.name)} {V.status_badge(t.status)}</div>"
    ]
    if d.error:
        parts.append(f'<div style="color:#c62828">error: {V.esc(d.error)}</div>')
    parts.append(V.kv_table(_shown(t.headline())))
    if len(chain) > 1 or kids:
        parts.append(_lineage_html(t, chain, kids, short))
    if repro:
        parts.append(_repro_html(repro, short))
    parts += [_charts_html(t), _eval_summary_html(t), _evals_html(t.latest_evals()), _data_html(t)]
    parts.append(V.details("config (resolved)", V.kv_table(V.flatten(t.config))))
    parts += _record_details(d)
    parts.append(_samples_html(t))
    parts.append("</div>")
    return "".join(parts)


def _lineage_html(t: Trace, chain: list[dict[str, Any]], kids: list[tuple[str, str]], short: dict[str, str]) -> str:
    items = []
    for e in chain:
        label = f"{V.id_html(e['trace'], short)} {V.esc(e['name'] or '(not found)')}"
        if e["steps"] and e["steps"][1] is not None:
            label += V.esc(f" (steps {e['steps'][0] or 0}→{e['steps'][1]})")
        items.append(f"<b>{label}</b>" if e["trace"] == t.id else label)
    body = " → ".join(items)
    if kids:
        body += "<br>children: " + ", ".join(f"{V.id_html(k, short)} {V.esc(n)}" for k, n in kids)
    return f"<div style='margin:6px 0'><b>lineage</b>: {body}</div>"


def _repro_html(r: Reproduction, short: dict[str, str]) -> str:
    ok = r.metrics_match
    color = "#2e7d32" if ok else "#c62828"
    of = V.id_html(r.of, short) if r.of is not None else V.esc(None)
    return (
        f"<div>reproduces <b>{of}</b>: <span style='color:{color}'>metrics "
        f"{'match' if ok else 'differ'}</span> ({r.rows_compared} rows compared, "
        f"max |diff| {V.fmt(r.max_abs_diff)})</div>"
    )


def _charts_html(t: Trace) -> str:
    """The metrics charts (static SVG), or nothing."""
    rows = t.metric_rows()
    charts = []
    for key in _chart_keys(rows):
        pts = [(r["step"], r[key]) for r in rows if key in r and isinstance(r.get("step"), int)]
        if pts:
            charts.append(V.svg_chart({key: pts}, title=key, width=300, height=150))
    if not charts:
        return ""
    return f'<div style="display:flex;gap:6px;flex-wrap:wrap">{"".join(charts)}</div>'


def _eval_summary_html(t: Trace) -> str:
    evals = (t.typed.metrics.eval if t.typed.metrics else None) or {}
    if not evals:
        return ""
    return V.details(
        "eval metrics",
        V.table(
            ["metric", "final", "at step", "best", "at step"],
            [
                [k, V.fmt(v.get("final")), v.get("final_step"), V.fmt(v.get("best")), v.get("best_step")]
                for k, v in evals.items()
            ],
        ),
    )


def _data_html(t: Trace) -> str:
    data_rows = []
    for kind, part in (t.typed.data or {}).items():
        for src in part.sources or []:
            data_rows.append(
                [
                    kind,
                    src.name,
                    src.env_id or src.dataset,
                    src.version,
                    V.fmt(src.args),
                    src.examples,
                    V.short(src.hash, 16),
                ]
            )
    if not data_rows:
        return ""
    header = ["split", "source", "environment", "version", "args", "examples", "hash"]
    return V.details("data", V.table(header, data_rows), open_=True)


def _record_details(d: TraceDoc) -> list[str]:
    """Seeds, dependencies, hardware, git and checkpoints of the trace record, those it has."""
    parts = []
    if d.seeds:
        parts.append(V.details("seeds", V.kv_table(V.flatten(d.seeds))))
    if d.deps:
        parts.append(V.details("dependencies", V.kv_table(d.deps)))
    if d.hardware:
        parts.append(V.details("hardware", V.kv_table(V.flatten(d.hardware))))
    if d.git:
        parts.append(V.details("git", V.kv_table(d.git)))
    if d.checkpoints:
        parts.append(
            V.details(
                "checkpoints",
                V.table(["step", "kind", "path"], [[c.step or c.name, c.kind, c.path] for c in d.checkpoints]),
            )
        )
    return parts


def _samples_html(t: Trace) -> str:
    if trace_denies(t.doc):
        return V.details(
            "samples", '<i>withheld: data_collection = "deny" (only hashes and aggregate metrics are kept)</i>'
        )
    samples = [typed(SampleRow, s) for s in t.sample_rows()[-SAMPLES_SHOWN:]]
    if not samples:
        return ""
    return V.details(
        "sample completions (latest)",
        V.table(
            ["step", "prompt", "completion", "reward"],
            [[s.step, s.prompt, s.completion, V.fmt(s.reward)] for s in samples],
        ),
    )


def _evals_html(evals: Evals) -> str:
    """The latest ``%prime_eval`` per environment (open: the first question after training)."""
    if not evals.items and not evals.warnings:
        return ""
    rows = [[e.env, V.fmt(e.mean), _interval(e), e.n, V.fmt(e.temperature), e.when, e.model] for e in evals.items]
    body = V.table(["environment", "mean reward", "95 % CI", "n", "temperature", "when", "model"], rows)
    notes = "".join(f'<div style="color:#888">{V.esc(w)}</div>' for w in evals.warnings[:5])
    return V.details("latest evaluations (%prime_eval)", body + notes, open_=True)


def _interval(e: LatestEval) -> str:
    return f"{V.fmt(e.ci95_low)} to {V.fmt(e.ci95_high)}" if e.ci95_low is not None and e.ci95_high is not None else ""


def _chart_keys(rows: list[dict[str, Any]]) -> list[str]:
    """The trace view's charts: the metrics table's chart metrics (train reward, eval rewards, loss)."""
    return M.curve_keys({k for r in rows for k in r})


# ---------------------------------------------------------------------------------------------
# lookup


def get(ref: Any, *, index: Index | None = None) -> Trace:
    """A trace from a `Trace`, a `Run`, a run directory, a trace id, a unique id prefix (4+
    characters) or a run name (the newest run of that name)."""
    from primenb.protocol.index import Index

    if isinstance(ref, Trace):
        return ref
    if hasattr(ref, "dir") and isinstance(ref.dir, Path):
        return Trace.load(ref.dir)
    text = str(ref).strip()
    if not text:
        raise TraceNotFound("no trace given")
    path = Path(text).expanduser()
    if is_regular(RunDir(path).trace_path):
        return Trace.load(path)
    index = index or Index()
    rows = index.query("SELECT trace, run_dir FROM traces WHERE trace = ?", (text,))
    if not rows and len(text) >= 4:
        # a literal prefix: LIKE would read `_` and `%` as wildcards (`show a_b_` opening another trace)
        rows = index.query(
            "SELECT trace, run_dir FROM traces WHERE substr(trace, 1, ?) = ? ORDER BY created DESC",
            (len(text), text),
        )
        if len(rows) > 1:
            raise TraceNotFound(
                f"{text!r} matches {len(rows)} traces ({', '.join(r[0] for r in rows[:5])}); "
                "give more characters of the trace id"
            )
    if not rows:
        rows = index.query("SELECT trace, run_dir FROM traces WHERE name = ? ORDER BY created DESC LIMIT 1", (text,))
    if not rows:
        raise TraceNotFound(
            f"no trace {text!r}: not a trace id, id prefix, run name or run directory in the "
            f"index ({index.path}). `%prime_harness show` lists traces; "
            "`%prime_harness reindex [FOLDER]` adds runs it does not know yet"
        )
    trace_id, run_dir = rows[0]
    doc = read_trace(run_dir)
    if doc is None or doc.get("trace_id") != trace_id:
        raise TraceNotFound(
            f"trace {trace_id}: its run directory {run_dir} no longer holds it "
            "(moved or deleted); `%prime_harness reindex` updates the index"
        )
    reconcile(doc, Path(run_dir))
    return Trace(doc, run_dir)


__all__ = ["Trace", "TraceNotFound", "get", "indexed_short_ids"]
