"""The settings the config builder shows, and where each lives in an RL or an SFT TOML.

Only the form's own keys are ever written: edits go through tomlkit on the text as it stands, so
comments, layout and every key the form does not know stay as they were.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from primenb.protocol.fields import MISSING, RL_SOURCE, RL_TASKSET, SETTINGS, Mode, lookup, path_parts


@dataclass(frozen=True)
class FormField:
    key: str  # a setting of `primenb.protocol.fields.SETTINGS`: where RL and SFT keep it
    label: str
    owns: tuple[str, ...] = ()  # more path prefixes whose diagnostics belong next to this field

    @property
    def rl(self) -> tuple[str, ...]:  # candidate paths in an RL config: the first present is read and written
        return SETTINGS[self.key].rl

    @property
    def sft(self) -> tuple[str, ...]:  # ... in an SFT config; empty: the mode has no such setting
        return SETTINGS[self.key].sft

    def paths(self, mode: Mode) -> tuple[str, ...]:
        return SETTINGS[self.key].paths(mode)


FIELDS: tuple[FormField, ...] = (
    FormField("model", "model"),
    FormField("env", "environment", owns=(RL_SOURCE,)),
    FormField("max_steps", "max steps"),
    FormField("lr", "learning rate", owns=("trainer.optim", "optim")),
    FormField("batch_size", "batch size"),
    FormField("group_size", "group size"),
    FormField("seq_len", "sequence length"),
    FormField("max_tokens", "max completion tokens"),
    FormField("temperature", "temperature"),
    FormField("lora", "LoRA"),
    FormField("lora_rank", "LoRA rank"),
    FormField("lora_alpha", "LoRA alpha"),
    FormField("lora_targets", "LoRA targets"),
    FormField("ckpt_interval", "checkpoint every", owns=("ckpt",)),
    FormField("eval_interval", "eval every"),
    FormField("train_gpus", "train GPUs"),
    FormField("infer_gpus", "inference GPUs"),
    FormField("backend", "backend"),
)
BY_KEY = {f.key: f for f in FIELDS}

_MISSING = MISSING


def get_at(data: Any, path: str) -> Any:
    """The value at ``a.b[0].c`` in nested dicts/lists, or `_MISSING`."""
    return lookup(data, path)


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
    parts = path_parts(path)
    node = doc
    for part in parts[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    if parts[-1] in node:
        del node[parts[-1]]


def owner(diag_path: str, mode: Mode) -> str | None:
    """The form field a diagnostic at ``diag_path`` belongs next to (None: no field shows it)."""
    best, best_len = None, -1
    for f in FIELDS:
        for p in (*f.paths(mode), *f.owns):
            if (diag_path == p or diag_path.startswith((p + ".", p + "["))) and len(p) > best_len:
                best, best_len = f.key, len(p)
    return best


__all__ = ["BY_KEY", "FIELDS", "RL_TASKSET", "FormField", "get_at", "has", "owner", "read", "remove_at", "set_at"]
