"""Items 1 and 4: hostile bundles and run names never place a file outside its folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primenb.errors import PrimenbError
from tests.adversarial.conftest import rl_text, tree


def _bundle(root: Path, *, name: str = "ok-run", step: object = 3, trace_id: object = "abcdef0123") -> Path:
    b = root / "bundle"
    (b / "final").mkdir(parents=True)
    (b / "final" / "evil.py").write_text("open('/tmp/pwned', 'w')\n")
    (b / "trace.json").write_text(json.dumps({"trace_id": trace_id, "name": name, "status": "completed"}))
    (b / "primenb_export.json").write_text(json.dumps({"trace_id": trace_id, "name": name, "final": {"step": step}}))
    return b


@pytest.mark.parametrize("step", ["../../../../.ipython/profile_default/startup", "/abs/startup", 1.5, -1, [1]])
def test_item01_import_final_step_cannot_escape(home: Path, step: object) -> None:
    import primenb.harness as h

    bundle = _bundle(home.parent, step=step)
    before = tree(home.parent)
    with pytest.raises(PrimenbError, match=r"final\.step"):
        h.import_(bundle)
    after = tree(home.parent) - before
    assert not [p for p in after if "evil" in p or "startup" in p], after
    assert not (home / "outputs").exists()


def test_item01_import_trace_name_cannot_escape(home: Path) -> None:
    import primenb.harness as h

    bundle = _bundle(home.parent, name="../../x")
    with pytest.raises(PrimenbError, match="trace name"):
        h.import_(bundle)
    assert not (home.parent.parent / "x").exists() and not (home / "outputs").exists()


def test_item01_import_refuses_symlinks_and_bad_ids(home: Path) -> None:
    import primenb.harness as h

    bundle = _bundle(home.parent)
    (bundle / "final" / "link").symlink_to(home.parent)
    with pytest.raises(PrimenbError, match="symbolic links"):
        h.import_(bundle)
    (bundle / "final" / "link").unlink()
    (bundle / "trace.json").write_text(json.dumps({"trace_id": "x' OR 1=1 --", "name": "n"}))
    with pytest.raises(PrimenbError, match="not a trace id"):
        h.import_(bundle)
    # a well-formed bundle still imports, inside outputs/
    (bundle / "trace.json").write_text(json.dumps({"trace_id": "abcdef0123", "name": "ok-run", "status": "completed"}))
    t = h.import_(bundle)
    assert t.run_dir == (home / "outputs" / "ok-run").resolve()
    assert (t.run_dir / "checkpoints" / "step_3" / "evil.py").is_file()


@pytest.mark.parametrize("name", ["../../escape", "/abs/path", "a" * 300, "..", "a/b", "x\x00y", " lead"])
def test_item04_run_names_stay_in_output_dir(home: Path, name: str) -> None:
    from primenb.backends.local import prepare
    from primenb.config import load_config

    config = load_config(rl_text(max_steps=2))
    before = tree(home.parent)
    with pytest.raises(PrimenbError, match="cannot be used"):
        prepare(config, name=name)
    assert tree(home.parent) == before


def test_item04_harness_import_of_long_name_is_a_message(home: Path) -> None:
    import primenb.harness as h

    with pytest.raises(PrimenbError, match="255 bytes"):
        h.import_(_bundle(home.parent, name="é" * 200))
