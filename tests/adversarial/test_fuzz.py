"""Property-based fuzzing (Hypothesis) of the config pipeline and the run-directory readers:
random TOML documents and random bytes never produce a traceback, only diagnostics or a
`PrimenbError` (ConfigError included). Bounded examples: runs in seconds. Scaling of validation
time with input size is measured in bench/bench_validate_scaling.py, not here."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError

KEYS = st.sampled_from(
    ["max_steps", "seq_len", "model", "name", "orchestrator", "trainer", "data", "primenb", "seed", "lr", "optim",
     "batch_size", "group_size", "source", "env", "taskset", "id", "extra_args", "api_key", "base_url", "x-y"]
)  # fmt: skip
SCALARS = (
    st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.booleans()
    | st.text(max_size=30)
    | st.sampled_from(["https://u:p@h", "--hf-token", "hf_abcdefghijklmnopqrstuvwxyz", "reverse-text"])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(KEYS | st.text(min_size=1, max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
DOCS = st.dictionaries(KEYS, VALUES, max_size=6)
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _toml(doc: dict[str, Any]) -> str:
    import tomlkit

    try:
        return tomlkit.dumps(doc)
    except Exception:  # a value tomlkit cannot write (e.g. huge ints): json-ish text is fine too
        return json.dumps(doc, default=str)


@FUZZ
@given(DOCS)
def test_random_toml_documents_give_diagnostics(doc: dict[str, Any]) -> None:
    from primenb.config import check, load_config

    text = _toml(doc)
    for mode in (None, "rl", "sft"):
        outcome = check(text, mode=mode)
        outcome.report.to_text()
        outcome.report.to_json()
    with contextlib.suppress(PrimenbError):
        load_config(text)


@FUZZ
@given(st.text(max_size=300))
@example(".toml")  # found by this test: a one-line text ending in .toml is a path
@example("[model\nname = 1")
def test_random_text_gives_diagnostics(text: str) -> None:
    from primenb.config import check

    if "\n" not in text and text.endswith(".toml"):  # one line naming a .toml file is read as a path
        with pytest.raises(PrimenbError, match=r"config file|not UTF-8"):
            check(text)
        return
    outcome = check(text)
    assert isinstance(outcome.report.to_text(), str)
    # refused only with a diagnostic that says something, never silently
    assert outcome.model is not None or outcome.report.errors, text
    assert all(d.message.strip() for d in outcome.report.errors)


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_as_config_file(data: bytes) -> None:
    from primenb.config import check

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_bytes(data)
        with contextlib.suppress(PrimenbError):
            check(path).report.to_text()


@FUZZ
@given(st.binary(max_size=400), st.binary(max_size=400), st.binary(max_size=200), st.binary(max_size=200))
def test_random_bytes_in_run_directory_files(status: bytes, metrics: bytes, trace: bytes, launcher: bytes) -> None:
    from primenb.protocol.index import Index
    from primenb.protocol.record import read_trace, reconcile
    from primenb.protocol.rundir import RunDir, read_jsonl, read_metrics
    from primenb.run import Run

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "outputs" / "r"
        (run / "configs").mkdir(parents=True)
        (run / "configs" / "resolved.json").write_bytes(trace)
        (run / "status.json").write_bytes(status)
        (run / "metrics.jsonl").write_bytes(metrics)
        (run / "samples.jsonl").write_bytes(metrics)
        (run / "trace.json").write_bytes(trace)
        (run / "launcher.json").write_bytes(launcher)
        RunDir(run).read_status()
        list(read_jsonl(run / "samples.jsonl"))
        read_metrics(run / "metrics.jsonl")
        r = Run(run)
        r.status  # noqa: B018
        r.refresh()
        r.metrics  # noqa: B018
        doc = read_trace(run)
        if doc is not None:
            reconcile(doc, run)
        report = Index(Path(tmp) / "home").reindex([run.parent])
        assert report["traces"] + len(report["skipped"]) <= 1


@FUZZ
@given(st.dictionaries(st.sampled_from(["trace_id", "name", "config", "metrics", "steps", "created", "revision",
                                        "status", "model", "data", "adapter"]), VALUES, max_size=8))  # fmt: skip
def test_random_trace_documents_never_break_the_index(doc: dict[str, Any]) -> None:
    from primenb.protocol.index import Index

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "outputs" / "r"
        run.mkdir(parents=True)
        (run / "trace.json").write_text(json.dumps(doc, default=str))
        index = Index(Path(tmp) / "home")
        index.reindex([run.parent])
        index.count()
