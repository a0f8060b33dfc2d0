"""Trust is provenance (issue 42): a run directory is trusted only when this installation's engine
started the run in that very folder (its record under PRIME_HOME); every other way a folder enters
the index (harness import, a copy reindexed, a move, an unpacked bundle, a run synced back from a
host, a hand-made folder, a record forged inside the folder) is untrusted on every verb until
``--trust``. The ways are generated; the engine-made folder is the control."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.protocol.provenance import FOLDER, record_engine_run
from primenb.protocol.record import write_trace
from tests.homes import plain_home  # noqa: F401  (this folder's conftest has a work/ home; these take the plain one)

HOSTILE = ["subprocess:getoutput", "os:system", "builtins:exec", "some_pkg.mod:build"]
VERBS = ["serve add", "rerun", "apply", "eval", "generate", "load"]


def _made_here(root: Path, trace_id: str) -> Path:
    """A folder as the engine leaves it: trace.json plus the record under PRIME_HOME."""
    run_dir = root / "runs" / f"run-{trace_id}"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "config.toml").write_text("")
    src = {"name": "x", "env_id": "subprocess:getoutput", "args": {"cmd": "touch MARKER"}}
    doc = {"trace_id": trace_id, "trace_version": 1, "name": run_dir.name, "status": "completed", "mode": "rl"}
    write_trace(run_dir, {**doc, "data": {"train": {"sources": [src]}}})
    record_engine_run(run_dir, trace_id)
    return run_dir


def _imported(root: Path, made: Path) -> Path:
    import primenb.harness as h

    bundle = h.export(str(made), str(root / "bundle"))
    return h.import_(str(bundle), str(root / "imported")).run_dir


def _copied(root: Path, made: Path) -> Path:
    target = root / "copied" / made.name
    shutil.copytree(made, target)
    return target


def _moved(root: Path, made: Path) -> Path:
    target = root / "moved"
    made.rename(target)
    return target


def _unpacked_bundle(root: Path, made: Path) -> Path:
    import primenb.harness as h

    bundle = h.export(str(made), str(root / "bundle"))
    target = root / "unpacked"
    shutil.copytree(bundle, target)  # a bundle unpacked by hand, never `harness import`ed
    return target


def _synced_back(root: Path, made: Path) -> Path:
    """A remote run's local mirror: the engine ran (and recorded) on the host's path; its files
    were copied back into another folder here."""
    target = root / "mirror" / made.name
    shutil.copytree(made, target)
    doc = json.loads((target / "trace.json").read_text())
    write_trace(target, {**doc, "run_dir": str(target), "remote_run_dir": str(made)})
    return target


def _forged_inside(root: Path, made: Path) -> Path:
    """A copy that carries a record of its own (the record's folder and file, inside the run dir)."""
    target = _copied(root, made)
    doc = json.loads((target / "trace.json").read_text())
    st_ = target.stat()
    forged = {"trace_id": doc["trace_id"], "path": str(target), "dev": st_.st_dev, "ino": st_.st_ino}
    (target / FOLDER).mkdir()
    (target / FOLDER / "record.json").write_text(json.dumps(forged))
    return target


def _other_trace_in_a_made_folder(root: Path, made: Path) -> Path:
    """A made-here folder whose trace.json was replaced by another run's (another trace id)."""
    doc = json.loads((made / "trace.json").read_text())
    write_trace(made, {**doc, "trace_id": "f" * 12})
    return made


def _marked_imported(root: Path, made: Path) -> Path:
    """Made here, but marked imported: a trace that says it came from elsewhere is believed."""
    doc = json.loads((made / "trace.json").read_text())
    write_trace(made, {**doc, "imported": {"from": "/elsewhere", "host": "other"}})
    return made


WAYS = {
    "harness import": _imported,
    "copied and reindexed": _copied,
    "moved and reindexed": _moved,
    "unpacked bundle reindexed": _unpacked_bundle,
    "synced back from a host": _synced_back,
    "record forged inside the folder": _forged_inside,
    "another trace written into a made folder": _other_trace_in_a_made_folder,
    "marked imported": _marked_imported,
}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    way=st.sampled_from(sorted(WAYS)),
    trace_id=st.text("0123456789abcdef", min_size=10, max_size=12),
    env_id=st.sampled_from(HOSTILE),
    verb=st.sampled_from(VERBS),
)
def test_no_way_into_the_index_but_the_engine_is_trusted(
    way: str, trace_id: str, env_id: str, verb: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.protocol.index import Index
    from primenb.traces import trust
    from primenb.traces.trace import get

    root = Path(tempfile.mkdtemp(dir=home))
    monkeypatch.setenv("PRIME_HOME", str(root / "home"))  # each example its own index and records
    made = _made_here(root, trace_id)
    assert trust.made_here(get(str(made)))  # the control: what the engine made here is trusted
    trust.check(get(str(made)), [env_id], verb)

    entered = WAYS[way](root, made)
    Index().reindex([str(entered)])
    trace = get(str(entered))
    assert not trust.made_here(trace), way
    with pytest.raises(trust.UntrustedTrace, match="--trust"):
        trust.check(trace, [env_id], verb)
    trust.check(trace, [env_id], verb, trust=True)  # --trust is the only way up


def test_a_run_the_engine_started_leaves_its_record(home: Path) -> None:
    """The record comes from the engine process itself (`python -m primenb.engine RUN_DIR`):
    written when the run starts, before training, so even a run that fails later is made here."""
    import subprocess
    import sys

    from primenb.config.templates import starter
    from primenb.protocol.record import read_trace
    from primenb.traces import trust
    from primenb.traces.trace import Trace

    run_dir = home / "engine-run"
    (run_dir / "configs").mkdir(parents=True)
    # a config the engine reads and then refuses (no such model): the record is written first
    cfg = {"mode": "rl", "model": {"name": "no/such-model-here"}, "max_steps": 1}
    (run_dir / "configs" / "resolved.json").write_text(json.dumps(cfg))
    (run_dir / "configs" / "config.toml").write_text(starter(None, None))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PRIME_HOME": str(home / "home")}
    subprocess.run([sys.executable, "-m", "primenb.engine", str(run_dir)], env=env, timeout=300, check=False)
    doc: Any = read_trace(run_dir)
    assert doc is not None and trust.made_here(Trace(doc, run_dir))
    assert list((home / "home" / FOLDER).glob("*.json"))


def test_only_the_engine_process_writes_the_record_trust_is_read_from() -> None:
    """The AST scan of round 3, extended to how folders enter: every module that writes a trace or
    indexes a folder (import, reindex, remote mirrors, hosted mirrors, the launcher's queued trace)
    is enumerated, and none of them, nor anything else but the engine process, writes a provenance
    record: entering the index never makes a folder trusted."""
    import ast

    import primenb

    root = Path(primenb.__file__).parent
    writers, recorders = set(), set()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in ("write_trace", "index_trace", "reindex", "import_"):
                writers.add(rel)
            if name == "record_engine_run":
                recorders.add(rel)
    # the enumeration sees the roads it claims to (a rename would make this pass vacuously)
    assert {"traces/transfer.py", "harness/__init__.py", "backends/remote.py", "backends/queued.py"} <= writers
    assert recorders == {"engine/runner.py"}, recorders  # (provenance.py defines it)
