"""Trust follows the trace (issue 31): a bundle whose trace *records* ``env_id =
"subprocess:getoutput"``, ``args = {cmd = "touch MARKER"}`` ran the command on serve, serve add,
eval, generate and load, though apply and rerun refused its config. One function
(`primenb.traces.trust.environment`) is now the only road from a trace to environment code; this
file holds that every caller of the registry's builders goes through it, and runs each path on
the hostile bundle."""

from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Any

import pytest

import primenb
from primenb.errors import PrimenbError
from primenb.protocol.record import write_trace
from tests.homes import plain_home  # noqa: F401  (this folder's conftest has a work/ home; these take the plain one)

ROOT = Path(primenb.__file__).parent

# the registry's builders: each one turns an id into imported code
BUILDERS = {"get_environment", "build_environment", "get_factory", "_import_target", "_entry_factory"}

# who may call them directly, and why; everyone else goes through primenb.traces.trust
ALLOWED = {
    "envs/registry.py": "the registry itself",
    "envs/catalog.py": "`env add`/`env info`: the person's own target, bounded reward calls",
    "envs/manage.py": "`env add`: the person's own target",
    "traces/trust.py": "the trust road",
    "engine/data.py": "the engine process builds the config it was launched with; every verb that "
    "launches a trace's config (apply, rerun, the sidebar's Apply) checks it first",
    "config/envcheck.py": "validation: `get_factory` of a built-in only, for its argument names",
}


def _callers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in BUILDERS:
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and node.attr in BUILDERS:
                names.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                names |= {a.name for a in node.names if a.name in BUILDERS}
        if names:
            found[path.relative_to(ROOT).as_posix()] = names
    return found


def test_every_caller_of_the_environment_registry_goes_through_the_trust_road() -> None:
    callers = _callers()
    stray = {k: sorted(v) for k, v in callers.items() if k not in ALLOWED and k != "envs/__init__.py"}
    assert not stray, f"these modules build environments without primenb.traces.trust: {stray}"
    # and the enumeration sees what it claims to (a renamed builder would make this pass vacuously)
    assert {"traces/trust.py", "engine/data.py", "envs/registry.py"} <= set(callers)


def test_every_module_that_reads_a_traces_recorded_sources_uses_the_road() -> None:
    """``data.*.sources`` is read through `trust.sources`; no face or verb walks it by hand and
    hands an ``env_id`` to something else."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("engine/", "protocol/", "traces/")):  # the writer, the readers, the road
            continue
        text = path.read_text(encoding="utf-8")
        if ('["env_id"]' in text or 'get("env_id")' in text) and "trust" not in text:
            offenders.append(rel)
    assert not offenders, offenders


# -- the hostile bundle on every path ---------------------------------------------------------


def _bundle(
    root: Path, marker: Path, *, imported: bool = True, real_checkpoint: bool = False, made_here: bool = False
) -> Path:
    run_dir = root / f"bundle-{time.monotonic_ns()}"
    (run_dir / "configs").mkdir(parents=True)
    from primenb.config.templates import starter

    (run_dir / "configs" / "config.toml").write_text(starter(None, None))  # a benign config
    ckpt = run_dir / "checkpoints" / "step_4"
    ckpt.mkdir(parents=True)
    if real_checkpoint:
        from primenb.engine.models import load_model

        model, tok, _ = load_model("primenb/tiny-byte", seed=0)
        model.save_pretrained(ckpt)
        tok.save_pretrained(ckpt)
    else:
        (ckpt / "config.json").write_text("{}")
    hostile = {
        "name": "x",
        "env_id": "subprocess:getoutput",
        "args": {"cmd": f"touch {marker}"},
        "text_template": "Q: {prompt}\nA:",
    }
    doc: dict[str, Any] = {
        "trace_id": f"{time.monotonic_ns() % 10**12:012x}",
        "trace_version": 1,
        "name": run_dir.name,
        "backend": "local",
        "mode": "rl",
        "status": "completed",
        "steps": {"start": 0, "last": 4, "max": 4},
        "final": {"step": 4, "path": str(ckpt), "kind": "model"},
        "finetune": "full",
        "model": {"id": "primenb/tiny-byte", "fingerprint": "abc"},
        "config": {},
        "data": {"train": {"sources": [hostile]}, "eval": {"sources": [hostile]}},
    }
    if imported:
        doc["imported"] = {"from": "/elsewhere", "imported_at": "2026-01-01T00:00:00+00:00", "host": "other"}
    write_trace(run_dir, doc)
    if made_here:  # what the engine records when it starts a run here (outside the folder)
        from primenb.protocol.provenance import record_engine_run

        record_engine_run(run_dir, doc["trace_id"])
    return run_dir


def test_serve_and_serve_add_take_the_recorded_prompt_format_as_data(home: Path) -> None:
    """`serve TRACE`, plain `serve` (every completed trace), `serve add` and an eval that starts a
    server all describe their models with `model_specs`: the untrusted trace is served, with its
    recorded prompt format, and its environment is never built."""
    from primenb.serve.client import model_specs

    marker = home / "MARKER-serve"
    run_dir = _bundle(home, marker)
    specs = model_specs([str(run_dir)])
    mine = [s for s in specs if s.get("trace")]
    assert mine and all(s["text_template"] == "Q: {prompt}\nA:" for s in mine)
    assert not marker.exists()


def test_a_recorded_prompt_format_that_is_not_a_template_is_not_used(home: Path) -> None:
    from primenb.serve.client import model_specs
    from primenb.traces.trace import get

    marker = home / "MARKER-template"
    run_dir = _bundle(home, marker)
    trace = get(str(run_dir))
    for bad in ("{0.__class__}", 12, "x" * 20_000 + "{prompt}"):
        doc = trace.doc if hasattr(trace, "doc") else None
        assert doc is not None
        doc["data"]["train"]["sources"][0]["text_template"] = bad
        write_trace(run_dir, doc)
        specs = [s for s in model_specs([str(run_dir)]) if s.get("trace")]
        assert specs and all(s["text_template"] is None for s in specs), bad
    assert not marker.exists()


def test_eval_refuses_arguments_an_untrusted_trace_recorded_before_anything_runs(home: Path) -> None:
    from primenb.serve.evaluate import evaluate

    marker = home / "MARKER-eval"
    run_dir = _bundle(home, marker)
    with pytest.raises(PrimenbError) as err:
        evaluate([str(run_dir)], "subprocess:getoutput", store=False)
    assert "imported" in str(err.value) and "--trust" in str(err.value)
    assert not marker.exists()


def test_the_magic_and_cli_eval_refuse_it_too(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from primenb.cli import main

    marker = home / "MARKER-cli"
    run_dir = _bundle(home, marker)
    assert main(["eval", str(run_dir), "--env", "subprocess:getoutput"]) != 0
    assert "--trust" in capsys.readouterr().err
    assert not marker.exists()


def test_load_and_generate_never_build_an_untrusted_environment(home: Path) -> None:
    """`primenb.generate` shows prompts as in training: for an untrusted trace, with its recorded
    format as data (a warning says how to trust it); `primenb.load` builds no environment."""
    marker = home / "MARKER-generate"
    run_dir = _bundle(home, marker, real_checkpoint=True)
    model, tok = primenb.load(str(run_dir))
    assert model is not None and tok is not None
    with pytest.warns(UserWarning, match="imported"):
        out = primenb.generate(str(run_dir), "abc", max_new_tokens=2)
    assert isinstance(out, str)
    assert not marker.exists()


def test_generate_builds_the_environment_of_a_trusted_or_local_trace(home: Path) -> None:
    """The guard: the road does build when it may (here the command runs, in tmp_path, by the
    person's explicit ``trust=True``, and for a trace made on this machine)."""
    from primenb.engine.inference import _environment
    from primenb.harness.inference import trained

    marker = home / "MARKER-trusted"
    run_dir = _bundle(home, marker)
    _environment(trained(str(run_dir), trust=True))
    assert marker.exists()
    marker.unlink()
    local = _bundle(home, marker, imported=False, made_here=True)
    _environment(trained(str(local)))
    assert marker.exists()
    marker.unlink()
    copied = _bundle(home, marker, imported=False)  # the same folder, but no engine made it here
    with pytest.warns(UserWarning, match="not made by this installation's engine"):
        _environment(trained(str(copied)))
    assert not marker.exists()


def test_apply_and_rerun_check_the_same_road(home: Path) -> None:
    """The trace's record is hostile but its config is benign: apply and rerun build only the
    config's environments (checked), never the record's."""
    import primenb.harness as h

    marker = home / "MARKER-apply"
    run_dir = _bundle(home, marker)
    for verb in (h.apply, h.rerun):
        try:
            run = verb(str(run_dir))
        except PrimenbError:  # the fake checkpoint's architecture: what matters is what ran
            continue
        run.stop(force=True)  # a started run is never left training after the test
    assert not marker.exists()
