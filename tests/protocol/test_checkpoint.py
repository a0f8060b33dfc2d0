"""`CheckpointDir` reads what ``save_pretrained`` really writes: an adapter, a full model, a folder
that holds neither; and the engine's loaders, the fingerprint and the trace record agree with it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.record import checkpoints

BASE = "primenb/tiny-byte"


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run directory with a LoRA adapter at step 2 and a full model at step 1, saved as the
    engine saves them (``save_pretrained``, then primenb's note)."""
    from peft import LoraConfig, get_peft_model

    from primenb.engine.models import build_byte_tokenizer, build_tiny_model

    run = tmp_path_factory.mktemp("run")
    (run / "status.json").write_text('{"state": "completed"}')
    full = run / "checkpoints" / "step_1"
    build_tiny_model(BASE, 0).save_pretrained(str(full))
    build_byte_tokenizer().save_pretrained(str(full))
    CheckpointDir(full).write_meta({"step": 1, "adapter": False, "base": {"name": BASE, "seed": 0, "path": None}})
    adapter = run / "checkpoints" / "step_2"
    lora = get_peft_model(build_tiny_model(BASE, 0), LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj"]))
    lora.save_pretrained(str(adapter))
    CheckpointDir(adapter).write_meta({"step": 2, "adapter": True, "base": {"name": BASE, "seed": 0, "path": None}})
    return {"run": run, "full": full, "adapter": adapter}


def test_kinds_follow_what_save_pretrained_wrote(saved: dict[str, Path], tmp_path: Path) -> None:
    adapter, full = CheckpointDir(saved["adapter"]), CheckpointDir(saved["full"])
    assert adapter.is_adapter() and not adapter.is_full_model() and adapter.kind == "adapter"
    assert full.is_full_model() and not full.is_adapter() and full.kind == "model"
    assert adapter.is_checkpoint() and full.is_checkpoint()
    empty = CheckpointDir(tmp_path / "pruned")
    assert not empty.is_checkpoint() and empty.read_meta() == {} and empty.base() == {}
    # the trace record lists them with the same kinds
    assert [(c["step"], c["kind"]) for c in checkpoints(saved["run"])] == [(1, "model"), (2, "adapter")]


def test_the_note_is_read_safely(tmp_path: Path) -> None:
    folder = CheckpointDir(tmp_path / "c")
    folder.root.mkdir()
    folder.write_meta({"step": 3, "base": {"path": "/w"}})
    assert folder.read_meta()["step"] == 3 and folder.base() == {"path": "/w"}
    folder.write_meta({"base": "not an object"})
    assert folder.base() == {}
    folder.meta_path.unlink()
    os.mkfifo(folder.meta_path)  # a FIFO never blocks the reader
    assert folder.read_meta() == {}
    folder.meta_path.unlink()
    folder.adapter_config_path.write_text('{"base_model_name_or_path": "org/base", "r": 2}')
    assert folder.is_adapter() and folder.adapter_base_name() == "org/base"
    folder.adapter_config_path.unlink()
    folder.adapter_config_path.mkdir()  # a folder named like the file is not an adapter
    assert not folder.is_adapter() and not folder.is_checkpoint()


def test_engine_loaders_agree_with_the_layout(saved: dict[str, Path], tmp_path: Path) -> None:
    from primenb.engine.fingerprint import fingerprint_for_checkpoint, fingerprint_for_name
    from primenb.engine.models import load_model, resolve_checkpoint
    from primenb.engine.models_info import ModelLoadError

    # a run directory or its checkpoints/ folder resolves to the latest step; a checkpoint to itself
    assert resolve_checkpoint(saved["run"]) == saved["adapter"]
    assert resolve_checkpoint(saved["run"] / "checkpoints") == saved["adapter"]
    assert resolve_checkpoint(saved["full"]) == saved["full"]
    # an adapter is fingerprinted as its base; a full model as itself (the same architecture here)
    base = fingerprint_for_name(BASE)["fingerprint"]
    assert fingerprint_for_checkpoint(saved["adapter"])["fingerprint"] == base
    assert fingerprint_for_checkpoint(saved["full"])["fingerprint"] == base
    model, _, recorded = load_model(BASE, init_from=str(saved["adapter"]))
    assert hasattr(model, "peft_config") and recorded["name"] == BASE
    model, _, recorded = load_model(BASE, init_from=str(saved["full"]))
    assert not hasattr(model, "peft_config") and recorded["path"] == str(saved["full"])
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "model.safetensors").write_bytes(b"")  # weights without a config
    with pytest.raises(ModelLoadError, match=f"no {CheckpointDir.MODEL_CONFIG} or {CheckpointDir.ADAPTER_CONFIG}"):
        load_model(BASE, init_from=str(tmp_path / "half"))
    with pytest.raises(FileNotFoundError, match="is not a checkpoint"):
        fingerprint_for_checkpoint(tmp_path / "half")
