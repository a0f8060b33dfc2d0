"""What the sidebar's REST routes return, as plain JSON-ready dicts (no tornado here).

Every function takes already-validated inputs (see `primenb.server.validate`). A run is always
addressed by its trace id; its run directory comes from the harness index, never from a request,
so no request can make the server read or write outside the run directories the index knows.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol import metrics as M
from primenb.protocol.documents import StatusDoc, is_live_state, typed
from primenb.protocol.index import Index, status_in
from primenb.protocol.privacy import trace_denies
from primenb.protocol.reader import read_text
from primenb.protocol.record import current_status, read_trace, reconcile
from primenb.protocol.rundir import RunDir, read_jsonl, read_metrics

MAX_METRIC_ROWS = 5000


class NotFound(PrimenbError):
    """A trace id the index does not know, or whose run directory no longer holds it."""


class Conflict(PrimenbError):
    """A request that cannot be honoured in the run's current state (apply on a live run, ...)."""


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become None, paths and other objects become strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


def clean_dict(value: dict[str, Any]) -> dict[str, Any]:
    return {str(k): clean(v) for k, v in value.items()}


# ---------------------------------------------------------------------------------------------
# the list


def list_traces(
    *,
    offset: int = 0,
    limit: int = 50,
    status: Sequence[str] = (),
    env: str | None = None,
    model: str | None = None,
    search: str | None = None,
    index: Index | None = None,
) -> dict[str, Any]:
    """Runs and their traces (every run has one from the moment it is queued), newest first."""
    from primenb.traces.table import COLUMNS, refresh_live

    index = index or Index()
    conds: list[str] = []
    params: list[Any] = []
    if status:
        cond, values = status_in(status)
        conds.append(cond)
        params += values
    for column, text in (("env", env), ("model", model)):
        if text:
            conds.append(f"{column} LIKE ? ESCAPE '\\'")
            params.append(f"%{_like(text)}%")
    if search:
        conds.append("(name LIKE ? ESCAPE '\\' OR trace LIKE ? ESCAPE '\\')")
        params += [f"%{_like(search)}%", f"{_like(search)}%"]
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    total = int(index.query(f"SELECT COUNT(*) FROM traces{where}", params)[0][0])
    rows = index.query(
        f"SELECT {', '.join(COLUMNS)} FROM traces{where} ORDER BY created DESC LIMIT ? OFFSET ?",
        [*params, limit, offset],
    )
    rows = refresh_live(rows, index)
    items = []
    for row in rows:
        item = dict(zip(COLUMNS, row, strict=True))  # every index column (`IndexRow`)
        item["live"] = is_live_state(item["status"])
        items.append(clean_dict(item))
    return {"items": items, "total": total, "offset": offset, "limit": limit}


def _like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# ---------------------------------------------------------------------------------------------
# one trace


def run_dir_of(trace_id: str, index: Index | None = None) -> Path:
    """The run directory the index records for exactly this trace id."""
    rows = (index or Index()).query("SELECT run_dir FROM traces WHERE trace = ?", (trace_id,))
    if not rows or not rows[0][0]:
        raise NotFound(f"no trace {trace_id!r} in the harness index (`primenb harness reindex` adds missing runs)")
    return Path(rows[0][0])


def load_doc(trace_id: str, index: Index | None = None) -> tuple[dict[str, Any], Path]:
    run_dir = run_dir_of(trace_id, index)
    doc = read_trace(run_dir)
    if doc is None or doc.get("trace_id") != trace_id:
        raise NotFound(f"trace {trace_id}: its run directory {run_dir} no longer holds it (moved or deleted)")
    reconcile(doc, run_dir)
    return doc, run_dir


def trace_detail(trace_id: str, index: Index | None = None) -> dict[str, Any]:
    from primenb.traces.trace import Trace

    doc, run_dir = load_doc(trace_id, index)
    trace = Trace(doc, run_dir)
    files = RunDir(run_dir)
    status = current_status(run_dir)
    st, d = typed(StatusDoc, status), trace.typed
    state = st.state or trace.state
    log_tail = files.log_tail(20)
    evals = trace.latest_evals()
    return clean_dict(
        {
            "trace": trace.id,
            "name": trace.name,
            "status": state,
            "live": is_live_state(state),
            "headline": {k: v for k, v in trace.headline(live_step=st.step).items() if v not in (None, "")},
            "backend": d.backend or st.backend,
            "parent": trace.parent,
            "lineage": trace.lineage(index),
            "children": [{"trace": t, "name": n} for t, n in trace.children(index)],
            "error": d.error or st.error,
            "step": st.step,
            "max_steps": st.max_steps or (d.steps.max if d.steps else None),
            "warnings": [*getattr(doc, "warnings", []), *getattr(status, "warnings", []), *evals.warnings][:20],
            # the latest %prime_eval per environment: env, mean, std, ci95_low/high, n, temperature, created, model
            "evals": [e.as_dict() for e in evals.items],
            # where each tracker run lives (trace.json `trackers`): the sidebar links http(s) URLs only
            "trackers": d.trackers,
            "config": trace.config,
            "summary": trace.summary,
            "log_tail": log_tail,
            "run_dir": str(run_dir),
        }
    )


def metrics_after(
    trace_id: str, cursor: int = 0, keys: Sequence[str] = (), index: Index | None = None
) -> dict[str, Any]:
    """The metric rows after the first ``cursor`` rows of ``metrics.jsonl``, and the run's state.

    A row's identity is its position in the file, not its step: an RL run's SFT warm-up counts
    its own steps (0..N) before GRPO restarts at 1, and an eval row and a train row can share a
    step, so "rows after step N" loses rows. ``cursor`` in the answer is what to send next; a
    ``start`` of 0 for a non-zero request means the file was rewritten (shorter), and the client
    starts over. Every row keeps its ``step`` and ``phase`` (``"sft warmup"``, ``"rl"``,
    ``"sft"``; derived from the ``warmup/`` key prefix for runs written before rows had one)."""
    run_dir = run_dir_of(trace_id, index)
    files = RunDir(run_dir)
    _sync(run_dir)
    every = read_metrics(files.metrics_path)
    start = cursor if cursor <= len(every) else 0
    picked = every[start : start + MAX_METRIC_ROWS]
    rows = [_metric_out(row, keys) for row in picked]
    status = typed(StatusDoc, current_status(run_dir))
    return clean_dict(
        {
            "trace": trace_id,
            "rows": rows,
            "start": start,
            "cursor": start + len(picked),
            "more": start + len(picked) < len(every),
            "status": status.state,  # the name of a list row's column (`IIndexRow.status`)
            "state": status.state,
            "step": status.step,
            "max_steps": status.max_steps,
        }
    )


def _metric_out(row: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    prefixes = tuple(k[:-1] for k in keys if k.endswith("/*"))
    out = {k: v for k, v in row.items() if not keys or k in keys or (prefixes and k.startswith(prefixes))}
    out["step"] = row["step"]
    out["phase"] = M.row_phase(row)
    return out


def samples(trace_id: str, limit: int, index: Index | None = None) -> dict[str, Any]:
    """The latest ``limit`` sampled rollouts (withheld when the run denies data collection)."""
    doc, run_dir = load_doc(trace_id, index)
    if trace_denies(doc):
        return {"trace": trace_id, "samples": [], "withheld": True}
    _sync(run_dir)
    rows = list(read_jsonl(RunDir(run_dir).samples_path))[-limit:] if limit else []
    keep = ("step", "prompt", "completion", "reward", "answer", "env", "source")
    return clean_dict(
        {"trace": trace_id, "samples": [{k: r[k] for k in keep if k in r} for r in rows], "withheld": False}
    )


def config_toml(trace_id: str, root_dir: str | None = None, index: Index | None = None) -> dict[str, Any]:
    """The run's config as TOML: the text it was launched with, else its resolved config dumped.

    ``contents_path``: the file's path relative to the Jupyter root (None when outside it), so the
    sidebar can open it in the editor; otherwise it shows the text read-only."""
    doc, run_dir = load_doc(trace_id, index)
    path = RunDir(run_dir).config_toml
    text = read_text(path, root=run_dir)
    source: Path | None = path
    if text is None:
        import tomlkit

        text = tomlkit.dumps(_toml_safe(doc.get("config") or {}))
        source = None
    rel = None
    if source is not None and root_dir:
        try:
            rel = source.resolve().relative_to(Path(root_dir).resolve()).as_posix()
        except ValueError:
            rel = None
    return {"trace": trace_id, "toml": text, "path": str(source) if source else None, "contents_path": rel}


def _toml_safe(value: Any) -> Any:
    """TOML has no null: drop None values (a resolved config keeps them as JSON null)."""
    if isinstance(value, dict):
        return {k: _toml_safe(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_toml_safe(v) for v in value if v is not None]
    return value


# ---------------------------------------------------------------------------------------------
# actions


def _sync(run_dir: Path) -> None:
    """A remote backend's run: bring its local mirror up to date (a local run: nothing to do)."""
    if is_live_state(RunDir(run_dir).read_status().get("state")):  # whatever the backend
        from primenb.backends import open_run

        try:
            open_run(run_dir).status  # noqa: B018 (reading the status syncs the mirror)
        except PrimenbError:  # a backend this machine does not know (a copied run): the files as they are
            return


def stop(trace_id: str, index: Index | None = None) -> dict[str, Any]:
    """Ask the run to checkpoint and stop; returns at once (the state turns ``stopped`` soon)."""
    from primenb.backends import open_run

    run_dir = run_dir_of(trace_id, index)
    if not RunDir(run_dir).status_path.exists():
        raise Conflict(f"trace {trace_id} has no run status in {run_dir}: nothing to stop")
    run = open_run(run_dir)
    state = run.stop(wait=False)
    return {"trace": trace_id, "state": state, "stop_requested": is_live_state(state)}


_reapers: list[threading.Thread] = []


def apply(
    trace_id: str, *, steps: int | None, overrides: Sequence[str], name: str | None, index: Index | None = None
) -> dict[str, Any]:
    """Start a run continuing the trace from its final checkpoint (``primenb.harness.apply``)."""
    import warnings

    from primenb.harness import apply as harness_apply
    from primenb.harness.refine import ApplyRefused

    run_dir_of(trace_id, index)  # a known trace id, nothing else
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            run = harness_apply(trace_id, steps=steps, overrides=list(overrides), name=name)
        except ApplyRefused as exc:
            raise Conflict(str(exc)) from None
    # wait for the child in a thread, so its process is reaped when it ends (no zombie)
    reaper = threading.Thread(target=_reap, args=(run,), name=f"primenb-reap-{run.name}", daemon=True)
    reaper.start()
    _reapers.append(reaper)
    doc = read_trace(run.dir) or {}
    return {
        "trace": doc.get("trace_id"),
        "parent": trace_id,
        "name": run.name,
        "run_dir": str(run.dir),
        "state": run.state,
        "warnings": [str(w.message) for w in caught],
    }


def _reap(run: Any) -> None:
    try:
        run.wait(poll=2.0)
    except Exception:  # the server must outlive any run problem
        return


__all__ = [
    "Conflict",
    "NotFound",
    "apply",
    "clean",
    "config_toml",
    "list_traces",
    "metrics_after",
    "run_dir_of",
    "samples",
    "stop",
    "trace_detail",
]
