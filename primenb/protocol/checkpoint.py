"""The checkpoint folder protocol: what one checkpoint holds and how a reader tells its kind.

``RUN_DIR/checkpoints/step_N/`` (also ``checkpoints/sft_warmup/``, an imported trace's checkpoint
and an export bundle's ``final/``) is ``save_pretrained`` output plus primenb's note:

    ``adapter_config.json``      PEFT wrote it: the folder holds a LoRA adapter only
    ``config.json``              transformers wrote it: a full model, weights of its own
    ``primenb_checkpoint.json``  the engine's note: step, mode, model, adapter, run, time and
                                 ``base`` (``{"name", "seed", "path"}``: the weights below an adapter)

`RunDir` (`primenb.protocol.rundir`) says where checkpoint folders are; `CheckpointDir` says what
is inside one. Nothing else joins these names. No torch import here, so viewers can use it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from primenb.fsutil import atomic_write_json
from primenb.protocol import reader


class CheckpointDir:
    """One checkpoint folder: the paths of its files, its kind, and primenb's note in it."""

    ADAPTER_CONFIG = "adapter_config.json"
    MODEL_CONFIG = "config.json"
    META = "primenb_checkpoint.json"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"CheckpointDir({str(self.root)!r})"

    # paths
    @property
    def adapter_config_path(self) -> Path:
        return self.root / self.ADAPTER_CONFIG

    @property
    def model_config_path(self) -> Path:
        return self.root / self.MODEL_CONFIG

    @property
    def meta_path(self) -> Path:
        return self.root / self.META

    # what it holds
    def is_adapter(self) -> bool:
        """A LoRA adapter (loads onto the base its note records)."""
        return self.adapter_config_path.is_file()

    def is_full_model(self) -> bool:
        """Weights of its own (and no adapter)."""
        return not self.is_adapter() and self.model_config_path.is_file()

    def is_checkpoint(self) -> bool:
        """Whether anything loadable is here (a pruned, moved or half-copied folder is not)."""
        return self.is_adapter() or self.model_config_path.is_file()

    @property
    def kind(self) -> Literal["adapter", "model"]:
        return "adapter" if self.is_adapter() else "model"

    # primenb's note, read through `primenb.protocol.reader` (regular file, bounded)
    def read_meta(self) -> dict[str, Any]:
        """``primenb_checkpoint.json``; ``{}`` when missing or unreadable (a checkpoint from elsewhere)."""
        return reader.read_json_object(self.meta_path)

    def write_meta(self, meta: dict[str, Any]) -> None:
        atomic_write_json(self.meta_path, meta)

    def base(self) -> dict[str, Any]:
        """The weights below an adapter as the note records them (``{}`` when it records none)."""
        base = self.read_meta().get("base")
        return base if isinstance(base, dict) else {}

    def adapter_base_name(self) -> str | None:
        """The base model PEFT recorded in ``adapter_config.json`` (``base_model_name_or_path``)."""
        name = reader.read_json_object(self.adapter_config_path).get("base_model_name_or_path")
        return name if isinstance(name, str) and name else None


__all__ = ["CheckpointDir"]
