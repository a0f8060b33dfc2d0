"""The run documents, typed: the one vocabulary of the files a run directory holds.

`State` is every run state there is. The models say what each document holds, field by field:
``status.json`` (`StatusDoc`), ``trace.json`` (`TraceDoc`), a ``metrics.jsonl`` row
(`MetricRow`), a ``samples.jsonl`` row (`SampleRow`), an ``evals/<env>.json`` (`EvalDoc`), a
harness index row (`IndexRow`) and an export bundle's manifest (`ManifestDoc`). Each has a version
field (not yet `EvalDoc`); every model keeps fields it does not declare (a newer primenb may write
more).

Reading is tolerant (`parse`): a field of the wrong type becomes unknown (left out of the
document, so ``doc.get(field)`` is None) and a warning says which, so one bad field in one
run degrades one cell of one row, never a list. `read_status` and `read_trace_doc` read through
`primenb.protocol.reader` (regular files only, bounded, depth-capped, surrogate-free).

`json_schema()` exports the schema of every document; ``labextension/src/documents.ts`` is
generated from it (`primenb.protocol.tsgen`).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, Strict, ValidationError

from primenb.protocol import reader

STATUS_VERSION = 1
TRACE_VERSION = 1
MANIFEST_VERSION = 1
INDEX_VERSION = 3  # the index's SQLite layout (``PRAGMA user_version``)
EVAL_VERSION = 1


class State(enum.StrEnum):
    """The state of a run (``status.json`` ``state``, ``trace.json`` ``status``). Members are
    strings, so ``State.RUNNING == "running"`` and they are written to JSON as their value.
    `UNKNOWN` is what a viewer says when a run records no state it can read (no status.json yet,
    a foreign or newer value); nothing writes it (`STATES` are the states a run records)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    STOPPED = "stopped"
    UNKNOWN = "unknown"

    @property
    def live(self) -> bool:
        return self in LIVE_STATES

    @property
    def final(self) -> bool:
        return self in FINAL_STATES

    @classmethod
    def parse(cls, value: Any) -> State | None:
        """The state ``value`` names; None for anything else (unknown, wrong type)."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value) if isinstance(value, str) else None
        except ValueError:
            return None

    @classmethod
    def of(cls, value: Any) -> State:
        """The state ``value`` names; `UNKNOWN` for anything else (missing, foreign, wrong type)."""
        return cls.parse(value) or cls.UNKNOWN


STATES = tuple(s for s in State if s is not State.UNKNOWN)  # what a run records, in lifecycle order
LIVE_STATES = (State.QUEUED, State.RUNNING)
FINAL_STATES = (State.COMPLETED, State.FAILED, State.STOPPED)


def is_live_state(value: Any) -> bool:
    """Whether ``value`` names a state in which the run may still be going (queued, running)."""
    return State.parse(value) in LIVE_STATES


def is_final_state(value: Any) -> bool:
    return State.parse(value) in FINAL_STATES


# field types: strict, so a number never passes as text nor text as a number
Str = str | None
Int = int | None
Num = int | float | None  # a JSON number (an integer is a float too)
# the text "running" is the state; written back as plain text
LaxState = Annotated[State, Strict(False), PlainSerializer(lambda s: s.value, return_type=str)]


class Document(BaseModel):
    """A tolerant, forward-compatible document: undeclared fields are kept as they are."""

    model_config = ConfigDict(extra="allow", strict=True)

    def to_dict(self) -> dict[str, Any]:
        """The document as the plain dict it was read from, less its unknown (wrong-typed) fields."""
        return self.model_dump(exclude_unset=True)


class Part(Document):
    """A nested object of a document."""


class StatusDoc(Document):
    """``status.json``: the state and progress of a run, rewritten atomically by its owner (the
    launcher while queued, then the engine)."""

    version: Int = None
    state: LaxState | None = None
    phase: Str = None
    phase_step: Int = None
    phase_total: Int = None
    name: Str = None
    backend: Str = None
    mode: Str = None
    model: Str = None
    trace_id: Str = None
    pid: Int = None
    ppid: Int = None
    host: Str = None
    queued_at: Str = None
    started_at: Str = None
    ended_at: Str = None
    updated_at: Str = None
    step: Int = None
    max_steps: Int = None
    warmup_step: Int = None
    warmup_steps: Int = None
    wall_s: Num = None
    final_checkpoint: Str = None
    last_checkpoint: Str = None
    error: Str = None
    error_type: Str = None
    log_tail: list[str] | None = None
    stop_requested: Str = None
    platform_status: Str = None
    world_size: Int = None
    rank: Int = None
    notes: list[Any] | None = None
    # what went wrong beside training and did not stop it (a tracker that failed): the monitor shows them
    warnings: list[str] | None = None
    # an RL run's plan as the ETA's cost model reads it: {"rollouts": per step, "max_tokens": per
    # completion} (`primenb.render.eta.grpo_per_sft`)
    step_plan: dict[str, Any] | None = None


class Steps(Part):
    start: Int = None
    last: Int = None
    max: Int = None


class EvalPoint(Part):
    key: Str = None
    value: Num = None
    step: Int = None


class Finals(Part):
    """The last value of a run's main metrics: the only declaration of these fields. The trace's
    metrics summary holds them, the index has a column of each name, and a
    `primenb.protocol.metrics.Metric`'s ``final`` names the one holding its last value."""

    final_reward: Num = None  # the train reward's
    final_loss: Num = None  # the loss's


FINALS: tuple[str, ...] = tuple(Finals.model_fields)
FINAL_REWARD, FINAL_LOSS = FINALS


class MetricsSummary(Finals):
    last_step: Int = None
    final: dict[str, Any] | None = None
    eval: dict[str, dict[str, Any]] | None = None
    curves: dict[str, dict[str, Any]] | None = None
    final_eval: EvalPoint | None = None
    best_eval: EvalPoint | None = None


class ModelInfo(Part):
    id: Str = None
    fingerprint: Str = None


class Adapter(Part):
    type: Str = None
    rank: Int = None
    alpha: Num = None
    target_modules: list[str] | str | None = None


class Source(Part):
    name: Str = None
    env_id: Str = None
    dataset: Str = None
    version: Str = None
    args: dict[str, Any] | None = None
    hash: Str = None
    examples: Int = None


class DataPart(Part):
    hash: Str = None
    examples: Int = None
    sources: list[Source] | None = None


class Checkpoint(Part):
    step: Int = None
    name: Str = None
    path: Str = None
    kind: Str = None


class Reproduction(Part):
    of: Str = None
    metrics_match: bool | None = None
    rows_compared: Int = None
    max_abs_diff: Num = None


class Privacy(Part):
    data_collection: Str = None
    record_hostname: bool | None = None
    record_git: bool | None = None


class TraceDoc(Document):
    """``trace.json``: what was trained, on what, with what, and how it did."""

    trace_version: Int = None
    trace_id: Str = None
    revision: Int = None
    parent: Str = None
    reproduces: Str = None
    reproduces_run_dir: Str = None
    name: Str = None
    run_dir: Str = None
    backend: Str = None
    host: Str = None
    mode: Str = None
    status: LaxState | None = None
    created: Num = None
    created_at: Str = None
    started_at: Str = None
    finished_at: Str = None
    updated_at: Str = None
    duration_s: Num = None
    config: dict[str, Any] | None = None
    steps: Steps | None = None
    model: ModelInfo | None = None
    adapter: Adapter | None = None
    data: dict[str, DataPart] | None = None
    metrics: MetricsSummary | None = None
    checkpoints: list[Checkpoint] | None = None
    final: Checkpoint | None = None
    error: Str = None
    error_type: Str = None
    stop_reason: Str = None
    reproduction: Reproduction | None = None
    privacy: Privacy | None = None
    seeds: dict[str, Any] | None = None
    deps: dict[str, Any] | None = None
    hardware: dict[str, Any] | None = None
    git: dict[str, Any] | None = None
    # where each tracker run lives: {"wandb": {"url"|"folder", "run_id"}, "mlflow": {"uri", "run_id"}, ...}
    trackers: dict[str, Any] | None = None


class MetricRow(Document):
    """One ``metrics.jsonl`` row: a logging step's numbers (any other key is a metric)."""

    step: int
    time: Num = None
    phase: Str = None


class SampleRow(Document):
    """One ``samples.jsonl`` row: a sampled rollout."""

    step: Int = None
    time: Num = None
    prompt: Any = None
    completion: Any = None
    answer: Any = None
    reward: Num = None
    env: Str = None
    source: Str = None


class EvalSummary(Part):
    """An evaluation's summary row (one model on one environment)."""

    model: Str = None
    reward_mean: Num = None
    reward_std: Num = None
    ci95_low: Num = None
    ci95_high: Num = None
    n: Int = None
    tokens_per_s: Num = None
    wall_s: Num = None


class EvalDoc(Document):
    """``evals/<env>.json``: the latest ``%prime_eval`` of a run's model on one environment
    (``created`` in seconds since the epoch; ``samples`` one row per rollout, not typed here)."""

    version: Int = None
    env: Str = None
    model: Str = None
    temperature: Num = None
    created: Num = None
    summary: EvalSummary | None = None


def _shown(**kw: Any) -> Any:
    """A column the traces table shows (in field order)."""
    return Field(json_schema_extra={"shown": True}, **kw)


class IndexRow(Document):
    """One row of the harness index (``index.sqlite`` table ``traces``): the only declaration of
    the trace columns. `INDEX_COLUMNS` gives each field's SQL type in table order; the traces
    table shows the fields marked ``shown``, the server lists every one, and the sidebar's
    TypeScript type is generated from this model."""

    # the server sends every column: required in the (serialization) schema the sidebar's type comes from
    model_config = ConfigDict(extra="allow", strict=True, json_schema_serialization_defaults_required=True)

    trace: str = _shown()
    parent: Str = _shown(default=None)
    name: Str = _shown(default=None)
    created: float = _shown(default=0.0)
    status: Str = _shown(default=None)
    mode: Str = _shown(default=None)
    model: Str = _shown(default=None)
    env: Str = _shown(default=None)
    steps: Int = _shown(default=None)
    lr: float | None = _shown(default=None)
    batch: Int = _shown(default=None)
    group_size: Int = _shown(default=None)
    lora_rank: Int = _shown(default=None)
    final_reward: float | None = _shown(default=None)
    best_eval: float | None = _shown(default=None)
    duration: float | None = _shown(default=None)
    backend: Str = _shown(default=None)
    trackers: Str = _shown(default=None)  # where the run is in W&B / trackio / MLflow / TensorBoard
    max_steps: Int = None
    best_eval_step: Int = None
    final_eval: float | None = None
    final_loss: float | None = None
    host: Str = None
    reproduces: Str = None
    metrics_match: Int = None
    fingerprint: Str = None
    data_hash: Str = None
    seed: Int = None
    run_dir: Str = None
    revision: int = 0


class ManifestFinal(Part):
    dir: Str = None
    path: Str = None
    kind: Str = None
    step: Int = None


class ManifestBase(Part):
    dir: Str = None
    original: Str = None


class ManifestDoc(Document):
    """``primenb_export.json``: what an export bundle holds."""

    version: Int = None
    trace_id: Str = None
    name: Str = None
    exported_at: Str = None
    from_run_dir: Str = None
    final: ManifestFinal | None = None
    base: ManifestBase | None = None


def _sql_type(name: str) -> str:
    if name == "trace":
        return "TEXT PRIMARY KEY"
    ann = str(IndexRow.model_fields[name].annotation)
    return "INTEGER" if "int" in ann else "REAL" if "float" in ann else "TEXT"


# (column, SQL type), in table order: the index, the table, the server and the sidebar read it
INDEX_COLUMNS: tuple[tuple[str, str], ...] = tuple((n, _sql_type(n)) for n in IndexRow.model_fields)
INDEX_NAMES: tuple[str, ...] = tuple(IndexRow.model_fields)
# the columns the traces table shows, in order
INDEX_SHOWN: tuple[str, ...] = tuple(
    n
    for n, f in IndexRow.model_fields.items()
    if (f.json_schema_extra or {}).get("shown")  # type: ignore[union-attr]
)

# ---------------------------------------------------------------------------------------------
# tolerant parsing

D = TypeVar("D", bound=Document)
_GONE = object()


class Parsed(dict[str, Any]):
    """A document read tolerantly: the plain dict, with ``warnings`` (what was unknown and why)."""

    warnings: list[str]

    def __init__(self, data: Mapping[str, Any], warnings: list[str] | None = None) -> None:
        super().__init__(data)
        self.warnings = list(warnings or [])


def _drop(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """Remove the deepest part of ``data`` that ``loc`` reaches (a field becomes unknown, a list
    item goes); its location, or None when ``loc`` is not in ``data``."""
    parent: Any = None
    key: Any = None
    node: Any = data
    reached: list[Any] = []
    for part in loc:
        if not _has(node, part):
            break
        if node[part] is _GONE:
            return (*reached, part)  # dropped already (another branch of a union)
        parent, key, node = node, part, node[part]
        reached.append(part)
    if parent is None:
        return None
    parent[key] = _GONE
    return tuple(reached)


def _has(node: Any, part: Any) -> bool:
    if isinstance(node, dict):
        return isinstance(part, str) and part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _purge(value: Any) -> Any:
    """``value`` without the parts `_drop` marked (iterative, like every walk of read data)."""
    if not isinstance(value, (dict, list)):
        return value
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for k in [k for k, v in node.items() if v is _GONE]:
                del node[k]
            stack.extend(v for v in node.values() if isinstance(v, (dict, list)))
        else:
            node[:] = [v for v in node if v is not _GONE]
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return value


def validate(model: type[D], raw: Any, *, where: str = "") -> tuple[D | None, list[str]]:
    """``raw`` (already sanitized by `reader.sanitize`, and owned by the caller: it is edited) as
    a ``model``, with every wrong-typed field left out; the warnings say which. None (with a
    warning) when ``raw`` is not an object or a required field is unusable."""
    prefix = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        return None, [f"{prefix}not a JSON object ({type(raw).__name__})"]
    warnings: list[str] = []
    for _ in range(64):
        try:
            return model.model_validate(raw), warnings
        except ValidationError as exc:
            dropped, seen = False, set()
            for err in exc.errors():
                loc = _drop(raw, tuple(err["loc"]))
                if loc is not None and loc not in seen:
                    seen.add(loc)
                    dropped = True
                    warnings.append(f"{prefix}{'.'.join(map(str, loc))}: {err['msg']}; read as unknown")
            _purge(raw)
            if not dropped:  # a required field is missing: not a document of this kind
                warnings.append(f"{prefix}{exc.errors()[0]['msg']} ({'.'.join(map(str, exc.errors()[0]['loc']))})")
                return None, warnings
    return None, [*warnings, f"{prefix}too many wrong fields"]  # pragma: no cover - 64 rounds of drops


def parse(model: type[D], raw: Any, *, where: str = "") -> Parsed | None:
    """``raw`` (any JSON value, not yet sanitized) as the plain dict of a ``model`` document,
    wrong-typed fields left out and listed in ``.warnings``; None when it is not one."""
    doc, warnings = validate(model, reader.sanitize(raw), where=where)
    return None if doc is None else Parsed(doc.to_dict(), warnings)


def typed(model: type[D], raw: Any) -> D:
    """``raw`` (a document read already, or any value) as a ``model``, as tolerantly as `validate`
    (a wrong-typed field is left out); an empty document when ``raw`` is not one. What a consumer
    reads fields from, so that mypy sees every field it names. A ``model`` already is itself."""
    if isinstance(raw, model):
        return raw
    doc, _ = validate(model, reader.sanitize(raw))
    return doc if doc is not None else model.model_construct()


def read_document(
    model: type[D], path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> tuple[Parsed | None, str | None]:
    """A document file read safely and typed: ``(doc, None)`` or ``(None, why)``."""
    value, why = reader.read_json(path, root=root)
    if why is not None:
        return None, why
    doc, warnings = validate(model, value, where=os.path.basename(path))
    if doc is None:
        return None, "; ".join(warnings)
    return Parsed(doc.to_dict(), warnings), None


def read_typed(
    model: type[D], path: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None
) -> tuple[D | None, str | None]:
    """A document file read safely as a ``model`` (what a consumer reads fields from): ``(doc,
    None)`` or ``(None, why)``; a wrong-typed field is left out, as `read_document` leaves it."""
    value, why = reader.read_json(path, root=root)
    if why is not None:
        return None, why
    doc, warnings = validate(model, value, where=os.path.basename(path))
    return (doc, None) if doc is not None else (None, "; ".join(warnings))


def read_status_doc(path: str | os.PathLike[str]) -> StatusDoc:
    """``status.json`` as a `StatusDoc`; an empty document when missing or unreadable."""
    doc, _ = read_typed(StatusDoc, path)
    return doc if doc is not None else StatusDoc()


def read_status(path: str | os.PathLike[str]) -> Parsed:
    """``status.json`` typed; an empty document when missing or unreadable."""
    doc, _ = read_document(StatusDoc, path)
    return doc if doc is not None else Parsed({})


def metric_row(row: Any) -> MetricRow | None:
    """A ``metrics.jsonl`` row typed (None when it has no integer ``step``)."""
    doc, _ = validate(MetricRow, row if isinstance(row, dict) else None)
    return doc


DOCUMENTS: dict[str, type[Document]] = {
    "StatusDoc": StatusDoc,
    "TraceDoc": TraceDoc,
    "MetricRow": MetricRow,
    "SampleRow": SampleRow,
    "EvalDoc": EvalDoc,
    "IndexRow": IndexRow,
    "ManifestDoc": ManifestDoc,
}


def json_schema() -> dict[str, Any]:
    """The JSON schema of every run document (``$defs``), plus the `State` values."""
    from pydantic.json_schema import models_json_schema

    # the index row as the server sends it (every column present); the files as they may be read
    modes = {m: "serialization" if m is IndexRow else "validation" for m in DOCUMENTS.values()}
    _, schema = models_json_schema(list(modes.items()), title="primenb run documents")  # type: ignore[arg-type]
    schema["versions"] = {
        "status": STATUS_VERSION,
        "trace": TRACE_VERSION,
        "manifest": MANIFEST_VERSION,
        "index": INDEX_VERSION,
        "eval": EVAL_VERSION,
    }
    return schema


__all__ = [
    "DOCUMENTS",
    "EVAL_VERSION",
    "FINALS",
    "FINAL_LOSS",
    "FINAL_REWARD",
    "FINAL_STATES",
    "INDEX_COLUMNS",
    "INDEX_NAMES",
    "INDEX_SHOWN",
    "LIVE_STATES",
    "MANIFEST_VERSION",
    "STATES",
    "STATUS_VERSION",
    "TRACE_VERSION",
    "Document",
    "EvalDoc",
    "Finals",
    "IndexRow",
    "ManifestDoc",
    "MetricRow",
    "Parsed",
    "SampleRow",
    "State",
    "StatusDoc",
    "TraceDoc",
    "is_final_state",
    "is_live_state",
    "json_schema",
    "parse",
    "read_document",
    "read_status",
    "read_status_doc",
    "read_typed",
    "typed",
    "validate",
]
