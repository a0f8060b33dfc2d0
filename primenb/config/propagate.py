"""Shared-field propagation, as prime-rl's `propagate_shared_fields`: top-level values fill the
sub-configs where they are unset; a sub-config value that disagrees is an error."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from primenb.config.positions import Path, TablePath
from primenb.protocol.fields import MISSING, lookup

# shared path -> sub-config paths it fills (inference only when [inference] exists)
_SCALARS: list[tuple[TablePath, list[TablePath]]] = [
    (
        ("model", "name"),
        [("trainer", "model", "name"), ("orchestrator", "model", "name"), ("inference", "vllm", "model")],
    ),
    (("model", "vlm"), [("trainer", "model", "vlm"), ("orchestrator", "model", "vlm")]),
    (("max_steps",), [("trainer", "max_steps"), ("orchestrator", "max_steps")]),
    (("seq_len",), [("trainer", "model", "seq_len"), ("orchestrator", "seq_len")]),
    (
        ("monitors", "file", "path"),
        [("trainer", "monitors", "file", "path"), ("orchestrator", "monitors", "file", "path")],
    ),
]
# shared tables whose every key fills the matching sub-config tables (a bare header enables them)
_TABLES: list[tuple[TablePath, list[TablePath]]] = [
    (("ckpt",), [("trainer", "ckpt"), ("orchestrator", "ckpt")]),
    (("resume",), [("trainer", "resume"), ("orchestrator", "resume")]),
    (("monitors", "wandb"), [("trainer", "monitors", "wandb"), ("orchestrator", "monitors", "wandb")]),
    (("tokenizer",), [("trainer", "tokenizer"), ("orchestrator", "tokenizer")]),
    (("log",), [("trainer", "log"), ("orchestrator", "log"), ("inference", "log")]),
    (("rollout_transport",), [("trainer", "rollout_transport"), ("orchestrator", "rollout_transport")]),
    (("slurm",), [("inference", "slurm")]),
]
# prime-rl does not fill these: it sets every component's table from the shared one, replacing
# what a sub-config wrote (`auto_setup_weight_broadcast`)
_REPLACED: list[tuple[TablePath, list[TablePath]]] = [
    (
        ("weight_broadcast",),
        [("trainer", "weight_broadcast"), ("orchestrator", "weight_broadcast"), ("inference", "weight_broadcast")],
    ),
]


def fed_by(path: Path, mode: str) -> list[Path]:
    """Sub-config paths whose value propagation takes from ``path`` or from inside it: when
    ``path`` is unusable, so are they (the shared value never reached them)."""
    if mode == "sft":
        return [("inference", "vllm", "model")] if ("model", "name")[: len(path)] == path[:2] else []
    out: list[Path] = []
    links = _SCALARS + _TABLES + _REPLACED + [(("trainer", "model", "lora"), [("orchestrator", "model", "lora")])]
    links += [(("orchestrator", "token_batch_size"), [("orchestrator", "batch_size")])]  # the 128 default
    for shared, targets in links:
        if shared[: len(path)] == path:  # path is the shared value or a table above it
            out += targets
        elif path[: len(shared)] == shared:  # a key inside a shared table
            out += [t + path[len(shared) :] for t in targets]
    return out


@dataclass
class Conflict:
    path: Path  # the sub-config key that disagrees
    shared: Path
    value: Any
    shared_value: Any


@dataclass
class Propagated:
    data: dict[str, Any]
    origins: dict[Path, Path] = field(default_factory=dict)
    conflicts: list[Conflict] = field(default_factory=list)
    replaced: list[Conflict] = field(default_factory=list)  # sub-config tables the shared one replaced


def _lookup(data: dict[str, Any], path: Path) -> tuple[bool, Any]:
    value = lookup(data, path)
    return (False, None) if value is MISSING else (True, value)


def _set(data: dict[str, Any], path: TablePath, value: Any) -> None:
    cur = data
    for p in path[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[path[-1]] = value


def propagate_rl(raw: dict[str, Any]) -> Propagated:
    data = copy.deepcopy(raw)
    out = Propagated(data)
    has_inference = isinstance(data.get("inference"), dict)

    def fill(shared: TablePath, target: TablePath, value: Any) -> None:
        if target[0] == "inference" and not has_inference:
            return
        present, current = _lookup(data, target)
        if not present:
            _set(data, target, copy.deepcopy(value))
            out.origins[target] = shared
        elif current != value and not isinstance(value, dict):
            out.conflicts.append(Conflict(target, shared, current, value))
            _set(data, target, copy.deepcopy(value))  # reported once; later rules see one value

    for shared, targets in _SCALARS:
        present, value = _lookup(data, shared)
        if present:
            for target in targets:
                fill(shared, target, value)
    for shared, table, target in _written_tables(data, _TABLES, has_inference):
        t_present, t_table = _lookup(data, target)
        if not t_present:
            _set(data, target, {})
            out.origins[target] = shared
        elif not isinstance(t_table, dict):
            continue
        elif not t_table and shared == ("slurm",):
            # [inference.slurm] is the very class of the shared [slurm]: upstream refuses both set
            # ("pick one place"), even empty; an empty [orchestrator.ckpt] beside [ckpt] it takes
            out.conflicts.append(Conflict(target, shared, t_table, table))
            continue
        if "type" in table and isinstance(t_table, dict) and t_table.get("type", table["type"]) != table["type"]:
            out.conflicts.append(Conflict(target + ("type",), shared + ("type",), t_table["type"], table["type"]))
            continue
        for key, value in table.items():
            fill(shared + (key,), target + (key,), value)
    for shared, table, target in _written_tables(data, _REPLACED, has_inference):
        t_present, t_table = _lookup(data, target)
        if t_present and t_table != table:
            out.replaced.append(Conflict(target, shared, t_table, table))
        _set(data, target, copy.deepcopy(table))
        out.origins[target] = shared
    _chat_template(data, out)
    _lora(data, out)
    orch = data.setdefault("orchestrator", {})
    if isinstance(orch, dict) and "batch_size" not in orch and "token_batch_size" not in orch:
        orch["batch_size"] = 128  # upstream's default when neither is set
    return out


def _written_tables(
    data: dict[str, Any], links: list[tuple[TablePath, list[TablePath]]], has_inference: bool
) -> Iterator[tuple[TablePath, dict[str, Any], TablePath]]:
    """(shared path, its table, a sub-config path it reaches) for each shared table the file writes."""
    for shared, targets in links:
        present, table = _lookup(data, shared)
        if not present or not isinstance(table, dict):
            continue
        for target in targets:
            if target[0] != "inference" or has_inference:
                yield shared, table, target


def _chat_template(data: dict[str, Any], out: Propagated) -> None:
    """vLLM serves the chat template the trainer's tokenizer uses (shared or the trainer's own)."""
    present, template = _lookup(data, ("trainer", "tokenizer", "chat_template"))
    inference = data.get("inference")
    if not present or template is None or not isinstance(inference, dict):
        return
    vllm = inference.setdefault("vllm", {})
    if isinstance(vllm, dict) and "chat_template" not in vllm:
        vllm["chat_template"] = template
        origin = out.origins.get(("trainer", "tokenizer", "chat_template"), ("trainer", "tokenizer", "chat_template"))
        out.origins[("inference", "vllm", "chat_template")] = origin


def _lora(data: dict[str, Any], out: Propagated) -> None:
    """Orchestrator LoRA inherits the trainer's rank/alpha; vLLM serves adapters of that rank."""
    present, lora = _lookup(data, ("trainer", "model", "lora"))
    if not present or not isinstance(lora, dict):
        return
    rank, alpha = lora.get("rank", 16), lora.get("alpha", 32.0)
    o_present, o_lora = _lookup(data, ("orchestrator", "model", "lora"))
    if not o_present or not isinstance(o_lora, dict):
        o_lora = {}
        _set(data, ("orchestrator", "model", "lora"), o_lora)
    for key, value in (("rank", rank), ("alpha", alpha)):
        if key in o_lora and o_lora[key] != value:
            out.conflicts.append(
                Conflict(("orchestrator", "model", "lora", key), ("trainer", "model", "lora", key), o_lora[key], value)
            )
        o_lora.setdefault(key, value)
    o_lora.setdefault("name", f"r{rank}-a{alpha:g}")
    if isinstance(data.get("inference"), dict):
        vllm = data["inference"].setdefault("vllm", {})
        vllm.setdefault("enable_lora", True)
        if isinstance(rank, int) and rank <= 512:  # upstream sets it after vLLM's own check (vLLM's max)
            vllm.setdefault("max_lora_rank", rank)


def propagate_sft(raw: dict[str, Any]) -> Propagated:
    data = copy.deepcopy(raw)
    out = Propagated(data)
    present, name = _lookup(data, ("model", "name"))
    if present and isinstance(data.get("inference"), dict):
        vllm = data["inference"].setdefault("vllm", {})
        if "model" not in vllm:
            vllm["model"] = name
            out.origins[("inference", "vllm", "model")] = ("model", "name")
    return out
