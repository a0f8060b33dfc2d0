"""The settings the config builder shows, and where each lives in an RL or an SFT TOML.

Only the form's own keys are ever written: edits go through tomlkit on the text as it stands, so
comments, layout and every key the form does not know stay as they were.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from primenb.errors import PrimenbError
from primenb.protocol.fields import Mode

RL_SOURCE = "orchestrator.train.source[0]"
RL_TASKSET = f"{RL_SOURCE}.env.taskset"  # an RL environment's id and arguments (SFT has none)


@dataclass(frozen=True)
class FormField:
    key: str
    label: str
    rl: tuple[str, ...]  # candidate paths in an RL config: the first present is read and written
    sft: tuple[str, ...]  # ... in an SFT config; empty: the mode has no such setting
    owns: tuple[str, ...] = ()  # more path prefixes whose diagnostics belong next to this field

    def paths(self, mode: Mode) -> tuple[str, ...]:
        return self.rl if mode == "rl" else self.sft


FIELDS: tuple[FormField, ...] = (
    FormField("model", "model", ("model.name", "trainer.model.name"), ("model.name",)),
    FormField("env", "environment", (f"{RL_TASKSET}.id",), ("data.name",), owns=(RL_SOURCE,)),
    FormField("max_steps", "max steps", ("max_steps",), ("max_steps",)),
    FormField("lr", "learning rate", ("trainer.optim.lr",), ("optim.lr",), owns=("trainer.optim", "optim")),
    FormField("batch_size", "batch size", ("orchestrator.batch_size",), ("data.batch_size",)),
    FormField("group_size", "group size", ("orchestrator.group_size",), ()),
    FormField("seq_len", "sequence length", ("seq_len", "trainer.model.seq_len"), ("data.seq_len",)),
    FormField("max_tokens", "max completion tokens", ("orchestrator.train.sampling.max_completion_tokens",), ()),
    FormField("temperature", "temperature", ("orchestrator.train.sampling.temperature",), ()),
    FormField("lora", "LoRA", ("trainer.model.lora",), ("model.lora",)),
    FormField("lora_rank", "LoRA rank", ("trainer.model.lora.rank",), ("model.lora.rank",)),
    FormField("lora_alpha", "LoRA alpha", ("trainer.model.lora.alpha",), ("model.lora.alpha",)),
    FormField("lora_targets", "LoRA targets", ("trainer.model.lora.target_modules",), ("model.lora.target_modules",)),
    FormField("ckpt_interval", "checkpoint every", ("ckpt.interval",), ("ckpt.interval",), owns=("ckpt",)),
    FormField("eval_interval", "eval every", ("orchestrator.eval.interval",), ("eval.interval",)),
    FormField("train_gpus", "train GPUs", ("deployment.num_train_gpus",), ("deployment.num_train_gpus",)),
    FormField("infer_gpus", "inference GPUs", ("deployment.num_infer_gpus",), ()),
    FormField("backend", "backend", ("primenb.backend",), ("primenb.backend",)),
)
BY_KEY = {f.key: f for f in FIELDS}

_PART = re.compile(r"^([A-Za-z0-9_\-]+)(?:\[(\d+)\])?$")


def _parts(path: str) -> list[tuple[str, int | None]]:
    out = []
    for part in path.split("."):
        m = _PART.match(part)
        if not m:
            raise PrimenbError(f"internal: bad config path {path!r}")
        out.append((m.group(1), int(m.group(2)) if m.group(2) is not None else None))
    return out


_MISSING = object()


def get_at(data: Any, path: str) -> Any:
    """The value at ``a.b[0].c`` in nested dicts/lists, or `_MISSING`."""
    for key, idx in _parts(path):
        if not isinstance(data, dict) or key not in data:
            return _MISSING
        data = data[key]
        if idx is not None:
            if not isinstance(data, list) or idx >= len(data):
                return _MISSING
            data = data[idx]
    return data


def has(data: Any, path: str) -> bool:
    return get_at(data, path) is not _MISSING


def read(field: FormField, mode: Mode, written: dict[str, Any], resolved: dict[str, Any] | None) -> Any:
    """What the form shows: the value as written, else the effective (default) value, else None."""
    for source in (written, resolved or {}):
        for path in field.paths(mode):
            value = get_at(source, path)
            if value is not _MISSING:
                return value
    return None


def write_path(field: FormField, mode: Mode, written: dict[str, Any]) -> str | None:
    """Where an edit goes: the first candidate path already written, else the first candidate."""
    paths = field.paths(mode)
    for path in paths:
        if has(written, path):
            return path
    return paths[0] if paths else None


def set_at(doc: Any, path: str, value: Any) -> None:
    """Set ``path`` in a tomlkit document, creating tables (a missing array entry is an error)."""
    from primenb.config.tomledit import set_key

    set_key(doc, path, value)


def remove_at(doc: Any, path: str) -> None:
    node = doc
    parts = _parts(path)
    for key, idx in parts[:-1]:
        if key not in node:
            return
        node = node[key]
        if idx is not None:
            if idx >= len(node):
                return
            node = node[idx]
    key, _ = parts[-1]
    if key in node:
        del node[key]


def owner(diag_path: str, mode: Mode) -> str | None:
    """The form field a diagnostic at ``diag_path`` belongs next to (None: no field shows it)."""
    best, best_len = None, -1
    for f in FIELDS:
        for p in (*f.paths(mode), *f.owns):
            if (diag_path == p or diag_path.startswith((p + ".", p + "["))) and len(p) > best_len:
                best, best_len = f.key, len(p)
    return best


__all__ = ["BY_KEY", "FIELDS", "RL_TASKSET", "FormField", "get_at", "has", "owner", "read", "remove_at", "set_at"]
