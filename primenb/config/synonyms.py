"""Names other tools use for our settings, and the "did you mean" they lead to.

People arrive with keys from TRL, Hugging Face `TrainingArguments`, PEFT or their own scripts
(`learning_rate`, `num_generations`, `lora_r`, `max_new_tokens`). An unknown key is matched, in
order: a curated synonym (below), a near spelling of a key of the same table, a near spelling
of a synonym (`lerning_rate`), a table elsewhere that accepts the key. The answer is a full TOML
path and a concrete line to write, so the hint is a fix rather than a list of keys.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from primenb.config.positions import Path
from primenb.config.schema_walk import key_index, keys_at
from primenb.protocol.fields import SETTINGS, Mode


@dataclass(frozen=True)
class Target:
    rl: str | None  # dotted TOML path in rl.toml (None: no such setting in RL)
    sft: str | None  # dotted TOML path in sft.toml
    note: str = ""  # why it is not a plain rename (steps, not epochs), shown with the hint


def _at(setting: str, note: str = "") -> Target:
    """Where `primenb.protocol.fields.SETTINGS` keeps ``setting`` in each mode."""
    where = SETTINGS[setting]
    return Target(where.path("rl"), where.path("sft"), note)


_LR = _at("lr")
_STEPS = _at("max_steps", "prime-rl counts optimizer steps, not epochs")
_BATCH = _at("batch_size", "rollouts (RL) or examples (SFT) per optimizer step")
_GROUP = _at("group_size", "completions sampled per prompt")
_COMPLETION = _at("max_tokens")
_RANK = _at("lora_rank")
_ALPHA = _at("lora_alpha")
_SEQ = _at("seq_len")
_WARMUP = _at("warmup_steps", 'warm-up needs a scheduler with one: type = "linear" or "cosine" in the same table')
_MODEL = _at("model")

# one table: the name another tool uses -> where the setting lives here
SYNONYMS: dict[str, Target] = {
    "learning_rate": _LR,
    "lr": _LR,
    "epochs": _STEPS,
    "num_epochs": _STEPS,
    "num_train_epochs": _STEPS,
    "max_train_steps": _STEPS,
    "num_steps": _STEPS,
    "num_train_steps": _STEPS,
    "total_steps": _STEPS,
    "training_steps": _STEPS,
    "warmup_steps": _WARMUP,
    "num_warmup_steps": _WARMUP,
    "weight_decay": _at("weight_decay"),
    "max_grad_norm": _at("max_norm"),
    "grad_clip": _at("max_norm"),
    "clip_grad_norm": _at("max_norm"),
    "batch_size": _BATCH,
    "train_batch_size": _BATCH,
    "per_device_train_batch_size": _BATCH,
    "global_batch_size": _BATCH,
    "gradient_accumulation_steps": _at(
        "micro_batch_size", "accumulation is batch_size / micro_batch_size: set the micro batch instead"
    ),
    "num_generations": _GROUP,
    "n_samples": _GROUP,
    "samples_per_prompt": _GROUP,
    "num_completions": _GROUP,
    "max_new_tokens": _COMPLETION,
    "max_completion_length": _COMPLETION,
    "max_tokens": _COMPLETION,
    "max_completion_tokens": _COMPLETION,
    "lora_r": _RANK,
    "lora_rank": _RANK,
    "r": _RANK,
    "rank": _RANK,
    "lora_alpha": _ALPHA,
    "alpha": _ALPHA,
    "lora_dropout": _at("lora_dropout"),
    "target_modules": _at("lora_targets"),
    "seed": _at("seed"),
    "max_seq_length": _SEQ,
    "max_seq_len": _SEQ,
    "max_length": _SEQ,
    "seq_length": _SEQ,
    "context_length": _SEQ,
    "seq_len": _SEQ,
    "temperature": _at("temperature"),
    "model_name": _MODEL,
    "model_name_or_path": _MODEL,
    "model_id": _MODEL,
    "base_model": _MODEL,
    "dataset_name": _at("dataset"),
    "save_steps": _at("ckpt_interval"),
    "wandb_project": _at("wandb_project"),
    "lr_scheduler_type": _at("scheduler_type"),
}


@dataclass(frozen=True)
class Suggestion:
    path: Path  # the full TOML path the key most likely meant
    hint: str


def _split(dotted: str) -> Path:
    return tuple(dotted.split("."))


def _dotted(path: Path) -> str:
    return ".".join(str(p) for p in path)


def _normal(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def _line(key: str, value: Any, written: str | None) -> str:
    """`key = value` as TOML, for a concrete fix: the value as written when known (`1e-5`, not
    `1e-05`), else rendered; tables and multi-line values as `...`."""
    import tomlkit

    from primenb.protocol.hashing import redact_text

    if isinstance(value, str) and redact_text(value) != value:
        return f"{key} = ..."  # a hint never repeats a secret
    if written:
        return f"{key} = {written}"
    if isinstance(value, (dict, list)) or value is None:
        return f"{key} = ..."
    try:
        return f"{key} = {tomlkit.item(value).as_string()}"
    except (TypeError, ValueError):
        return f"{key} = ..."


def _move(target: Path, value: Any, written: str | None, *, here: Path, note: str = "") -> str:
    table, key = target[:-1], str(target[-1])
    if table == here:
        where = "instead"
    else:
        where = f"under [{_dotted(table)}]" if table else "at the top level (above every [table])"
    fix = f"write `{_line(key, value, written)}` {where}"
    return f"did you mean `{_dotted(target)}`? {fix}" + (f" ({note})" if note else "")


@lru_cache(maxsize=1024)
def _close_synonym(name: str) -> str | None:
    close = difflib.get_close_matches(name, list(SYNONYMS), n=1, cutoff=0.8)
    return close[0] if close else None


def _synonym(key: str, mode: Mode, *, misspelt: bool) -> tuple[Path, str] | None:
    name = _normal(key)
    if misspelt:  # a misspelt synonym (`lerning_rate`)
        close = _close_synonym(name)
        if close is None:
            return None
        name = close
    target = SYNONYMS.get(name)
    dotted = target and (target.sft if mode == "sft" else target.rl)
    return (_split(dotted), target.note) if target and dotted else None


def suggest(
    root: type[BaseModel], mode: Mode, table: Path, key: str, value: Any, data: Any, *, written: str | None = None
) -> Suggestion | None:
    """Where the unknown ``key`` (at ``table``, holding ``value``, spelt ``written`` in the text)
    most likely belongs."""
    from primenb.protocol.hashing import is_secret_name

    if is_secret_name(key):
        value, written = None, None
    here = keys_at(root, table, data)
    found = _synonym(key, mode, misspelt=False)
    if found and found[0] != table + (key,):
        path, note = found
        return Suggestion(path, _move(path, value, written, here=table, note=note))
    close = difflib.get_close_matches(key, here, n=1, cutoff=0.6)
    if close:
        return Suggestion(table + (close[0],), f"did you mean `{close[0]}`?")
    found = _synonym(key, mode, misspelt=True)
    if found:
        path, note = found
        return Suggestion(path, _move(path, value, written, here=table, note=note))
    homes = [h for h in key_index(root).get(key, []) if h != (_dotted(table) or "top level")]
    if homes:
        home = () if homes[0] == "top level" else _split(homes[0])
        return Suggestion(home + (key,), _move(home + (key,), value, written, here=table))
    return None


__all__ = ["SYNONYMS", "Suggestion", "Target", "suggest"]
