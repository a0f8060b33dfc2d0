"""Architecture fingerprints: the same architecture gives the same fingerprint, whatever the weights.

``fingerprint = sha256(model class, model config minus bookkeeping keys, every parameter's name,
shape and dtype)``. LoRA wrappers are looked through (their base layers count, the adapters do
not), so a base model and that model under an adapter share a fingerprint. A model built on the
meta device (no memory, no weights) fingerprints like the real one: that is how `apply` checks
the model it would build before starting a run. torch is imported only by the functions that
need it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.hashing import canonical_json, sha256_text

# config keys that name, date or tune a model without changing its architecture
IGNORED_CONFIG_KEYS = frozenset(
    {
        "_name_or_path",
        "name_or_path",
        "architectures",
        "transformers_version",
        "dtype",
        "torch_dtype",
        "use_cache",
        "output_attentions",
        "output_hidden_states",
        "return_dict",
        "_commit_hash",
        "_attn_implementation",
        "_attn_implementation_autoset",
        "attn_implementation",
        "_experts_implementation",
        "initializer_range",
        "id2label",
        "label2id",
        "problem_type",
        "chunk_size_feed_forward",
        "tokenizer_class",
        "prefix",
        "task_specific_params",
    }
)
_PEFT_PREFIX = "base_model.model."


def _arch_config(config: Any) -> dict[str, Any]:
    data = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    return {k: v for k, v in sorted(data.items()) if k not in IGNORED_CONFIG_KEYS}


def _base_name(name: str) -> str | None:
    """A parameter name as the model without LoRA wrappers has it; None for adapter weights."""
    parts = name.split(".")
    if any(p.startswith("lora_") or p in ("modules_to_save",) for p in parts):
        return None
    if name.startswith(_PEFT_PREFIX):
        parts = name[len(_PEFT_PREFIX) :].split(".")
    return ".".join(p for p in parts if p not in ("base_layer", "original_module"))


def fingerprint(model: Any) -> dict[str, Any]:
    """``{"fingerprint", "config_hash", "params_hash", "num_params", "num_tensors", "class"}``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = []
    total = 0
    for name, p in model.named_parameters():
        clean = _base_name(name)
        if clean is None:
            continue
        params.append([clean, list(p.shape), str(p.dtype).replace("torch.", "")])
        total += p.numel()
    params.sort()
    config_hash = sha256_text(canonical_json(_arch_config(base.config)))
    params_hash = sha256_text(canonical_json(params))
    cls = type(base).__name__
    return {
        "fingerprint": sha256_text(canonical_json([cls, config_hash, params_hash]))[:20],
        "config_hash": config_hash[:20],
        "params_hash": params_hash[:20],
        "num_params": total,
        "num_tensors": len(params),
        "class": cls,
    }


def fingerprint_from_config(config: Any, dtype: str = "float32") -> dict[str, Any]:
    """The fingerprint of the model ``config`` builds (on the meta device: no weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return fingerprint(model)


def fingerprint_for_name(name: str) -> dict[str, Any]:
    """The fingerprint of what ``model.name`` builds: an embedded model, a local folder, or a hub id
    in the local cache (never downloads). Raises when the architecture cannot be determined."""
    from primenb.engine.models_info import is_tiny, tiny_size

    if is_tiny(name):
        from primenb.engine.models import tiny_config

        return fingerprint_from_config(tiny_config(tiny_size(name)))
    from transformers import AutoConfig

    return fingerprint_from_config(AutoConfig.from_pretrained(name, local_files_only=True))


def fingerprint_for_checkpoint(ckpt: str | Path) -> dict[str, Any]:
    """The fingerprint of the model a checkpoint folder loads as: its own config for a full
    model, its recorded base for a LoRA adapter."""
    folder = CheckpointDir(ckpt)
    if folder.is_adapter():
        base = folder.base()
        if base.get("path"):
            return fingerprint_for_checkpoint(base["path"])
        name = base.get("name") or folder.adapter_base_name()
        if not name:
            raise ValueError(f"{folder.root}: adapter without a recorded base model")
        return fingerprint_for_name(str(name))
    if not folder.is_full_model():
        raise FileNotFoundError(
            f"{folder.root} is not a checkpoint (no {CheckpointDir.MODEL_CONFIG} or {CheckpointDir.ADAPTER_CONFIG})"
        )
    from transformers import AutoConfig

    return fingerprint_from_config(AutoConfig.from_pretrained(str(folder.root), local_files_only=True))


__all__ = [
    "fingerprint",
    "fingerprint_for_checkpoint",
    "fingerprint_for_name",
    "fingerprint_from_config",
]
