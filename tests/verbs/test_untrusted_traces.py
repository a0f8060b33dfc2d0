"""Imported traces are untrusted until trusted: a bundle's config can name any importable callable
as an environment (``subprocess:getoutput`` with a ``cmd`` argument). `rerun`, `apply` and the
sidebar's Apply (the same harness function) refuse it, naming the module and ``--trust``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from primenb.config.templates import starter
from primenb.errors import PrimenbError
from primenb.protocol.record import write_trace

# every way a config names an environment the engine builds: a train source, an eval source,
# an SFT data name; each would run `cmd` when its environment is built
PLACES = {
    "train": ('[orchestrator.train.source.env.taskset]\nid = "reverse-text"', 1),
    "eval": ('[orchestrator.eval.source.env.taskset]\nid = "reverse-text"', 1),
}


def _hostile(marker: Path, where: str) -> str:
    text = starter(None, None)
    block, count = PLACES[where]
    assert text.count(block) == count
    return text.replace(block, f'{block.split(chr(10))[0]}\nid = "subprocess:getoutput"\ncmd = "touch {marker}"')


def _imported_trace(root: Path, text: str, *, imported: bool = True) -> Path:
    run_dir = root / f"bundle-{time.monotonic_ns()}"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "config.toml").write_text(text)
    ckpt = run_dir / "checkpoints" / "step_300"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text("{}")
    doc = {
        "trace_id": f"{time.monotonic_ns() % 10**12:012x}",
        "trace_version": 1,
        "name": run_dir.name,
        "backend": "local",
        "mode": "rl",
        "status": "completed",
        "steps": {"start": 0, "last": 300, "max": 300},
        "final": {"step": 300, "path": str(ckpt), "kind": "model"},
        "model": {"id": "primenb/tiny-byte", "fingerprint": "abc"},
        "config": {},
    }
    if imported:
        doc["imported"] = {"from": "/elsewhere", "imported_at": "2026-01-01T00:00:00+00:00", "host": "other"}
    write_trace(run_dir, doc)
    return run_dir


@pytest.mark.parametrize("where", sorted(PLACES))
@pytest.mark.parametrize("verb", ["rerun", "apply"])
def test_imported_trace_with_unknown_environment_is_refused_and_nothing_runs(home: Path, verb: str, where: str):
    import primenb.harness as h

    marker = home / f"ran-{verb}-{where}"
    run_dir = _imported_trace(home, _hostile(marker, where))
    with pytest.raises(PrimenbError) as err:
        getattr(h, verb)(str(run_dir))
    message = str(err.value)
    assert "'subprocess'" in message and "--trust" in message and "imported" in message
    assert not marker.exists()
    assert not (home / "outputs").exists()  # no run directory was even prepared


def test_the_cli_and_the_magic_refuse_it_the_same_way(home: Path, shell) -> None:
    from primenb.cli import main

    marker = home / "ran-faces"
    run_dir = _imported_trace(home, _hostile(marker, "train"))
    assert main(["harness", "rerun", str(run_dir), "--detach"]) == 2
    result = shell.run_cell(f"%prime_harness apply {run_dir}")
    assert type(result.error_in_exec).__name__ == "MagicFailed" and "--trust" in str(result.error_in_exec)
    assert not marker.exists()


def test_the_same_config_in_a_trace_made_here_is_not_questioned(home: Path) -> None:
    """Trust is about where a trace came from: a local run's own config (the user wrote it) and an
    imported trace on built-in environments pass the check (and fail later for other reasons)."""
    from primenb.config import load_config
    from primenb.harness.refine import require_trusted
    from primenb.traces.trace import get

    marker = home / "ran-local"
    text = _hostile(marker, "train")
    from primenb.protocol.provenance import record_engine_run

    local = get(str(_imported_trace(home, text, imported=False)))
    with pytest.raises(PrimenbError, match="not made by this installation's engine"):  # copied in by hand
        require_trusted(local, load_config(text), "rerun", trust=False)
    record_engine_run(local.run_dir, local.id)  # what the engine records when it starts the run here
    require_trusted(local, load_config(text), "rerun", trust=False)
    plain = get(str(_imported_trace(home, starter(None, None))))
    require_trusted(plain, load_config(starter(None, None)), "rerun", trust=False)
    hostile = get(str(_imported_trace(home, text)))
    require_trusted(hostile, load_config(text), "rerun", trust=True)  # trusted on purpose
    assert not marker.exists()  # the check itself builds nothing
    assert json.loads((Path(hostile.run_dir) / "trace.json").read_text())["imported"]


def test_the_sidebars_apply_route_refuses_it_too(home: Path) -> None:
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import read_trace
    from primenb.server import data

    marker = home / "ran-sidebar"
    run_dir = _imported_trace(home, _hostile(marker, "train"))
    doc = read_trace(run_dir)
    assert doc is not None and index_trace(doc, run_dir)
    with pytest.raises(PrimenbError, match="--trust") as err:
        data.apply(doc["trace_id"], steps=None, overrides=[], name=None)
    assert type(err.value).__name__ == "Conflict" and "'subprocess'" in str(err.value)
    assert not marker.exists()
