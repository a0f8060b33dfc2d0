"""Every reader of a trace goes through the typed reader (issue 42): a wrong-typed field in an
imported or copied-in trace (``model.base`` a string, a seed that is not a number) gave tracebacks
from `harness.inference.describe` on plain `primenb serve` (no server started for any trace),
`serve add`, eval and generate. Generated: every field inference reads x every wrong type; the
bad trace is one row's problem, named, and the good trace beside it is still served."""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError
from tests.homes import plain_home  # noqa: F401  (this folder's conftest has a work/ home; these take the plain one)

FIELDS = [
    "model",
    "model.id",
    "model.base",
    "model.base.seed",
    "model.base.name",
    "config",
    "config.primenb",
    "config.primenb.seed",
    "final",
    "final.path",
    "name",
    "finetune",
    "adapter",
    "backend",
    "data",
    "steps",
]
WRONG = st.one_of(
    st.sampled_from(["x", "", "12", "NaN", 1.5, True, False, -1, 10**30, [], [1], {}, {"a": 1}, None]),
    st.text(max_size=8),
    st.integers(),
    st.floats(allow_nan=True),
)


def _trace_dir(root: Path, name: str, doc_extra: dict[str, Any]) -> Path:
    run_dir = root / f"{name}-{time.monotonic_ns()}"
    ckpt = run_dir / "checkpoints" / "step_2"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    doc: dict[str, Any] = {
        "trace_id": f"{time.monotonic_ns() % 10**12:012x}",
        "trace_version": 1,
        "name": name,
        "status": "completed",
        "mode": "rl",
        "final": {"step": 2, "path": str(ckpt), "kind": "model"},
        "model": {"id": "primenb/tiny-byte", "base": {"name": "primenb/tiny-byte", "seed": 3, "path": None}},
        "config": {"primenb": {"seed": 3}},
    }
    for key, value in doc_extra.items():
        node = doc
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = value
    (run_dir / "trace.json").write_text(json.dumps(doc, default=str))
    return run_dir


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(FIELDS), value=WRONG)
def test_a_wrong_typed_field_is_one_traces_problem_named(home: Path, field: str, value: Any) -> None:
    from primenb.harness.inference import trained
    from primenb.serve.client import model_specs
    from primenb.traces.trace import get

    root = Path(tempfile.mkdtemp(dir=home))
    good = _trace_dir(root, "good", {})
    bad = _trace_dir(root, "bad", {field: value})
    bad_id = json.loads((bad / "trace.json").read_text())["trace_id"]

    # plain `serve` (every completed trace): the good one is served, the bad one served or named
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        specs = model_specs([str(good), str(bad)])
    assert any(s.get("trace_name") == "good" for s in specs)
    served_bad = any(s.get("trace") == bad_id for s in specs)
    named = [str(w.message) for w in seen if bad_id in str(w.message) and "not served" in str(w.message)]
    assert served_bad or named, (field, value)
    for spec in specs:  # what reaches the server is typed
        assert isinstance(spec["model_name"], str) and spec["model_name"]
        assert isinstance(spec["seed"], int) and not isinstance(spec["seed"], bool) and spec["seed"] >= 0

    # `serve TRACE`, `serve add`, eval and generate on the bad trace alone: a result or a clear error
    for call in (lambda: model_specs([str(bad)]), lambda: trained(get(str(bad)))):
        try:
            call()
        except PrimenbError as exc:
            assert bad_id in str(exc) or "bad" in str(exc), str(exc)


def test_the_issues_cases(home: Path) -> None:
    from primenb.harness.inference import TraceFieldError, trained
    from primenb.traces.trace import get

    for field, value in (("model.base", "a string"), ("model.base.seed", "abc"), ("config.primenb.seed", "x")):
        extra = {field: value, **({"model.base": None} if field.startswith("config") else {})}
        run_dir = _trace_dir(home, "bad", extra)
        with pytest.raises(TraceFieldError, match=field.replace(".", r"\.")):
            trained(get(str(run_dir)))
