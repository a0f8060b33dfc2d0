"""Names of the embedded models (no torch import, so the notebook side can list them)."""

from __future__ import annotations

from primenb.errors import PrimenbError
from primenb.protocol.fields import DEFAULT_MODEL

TINY_SIZES: dict[str, dict[str, int]] = {
    # measured on 2 CPU cores, see docs/engine.md; params include the tied embedding
    "xs": {"layers": 2, "hidden": 128, "heads": 4, "ffn": 512, "params": 558_976},
    "s": {"layers": 4, "hidden": 256, "heads": 8, "ffn": 1024, "params": 4_266_240},
    "m": {"layers": 4, "hidden": 512, "heads": 8, "ffn": 2048, "params": 16_921_088},
    # a ~0.5 B Qwen2-shaped model for GPU benchmarks (bench/gpu.sh); too slow to train on a CPU
    "0.5b": {"layers": 24, "hidden": 1024, "heads": 16, "ffn": 5504, "params": 506_852_352},
}
TINY_MODELS: dict[str, str] = {
    "primenb/tiny-byte": "xs",
    "primenb/tiny-byte-xs": "xs",
    "primenb/tiny-byte-s": "s",
    "primenb/tiny-byte-m": "m",
    "primenb/byte-0.5b": "0.5b",
}


class ModelLoadError(PrimenbError, RuntimeError):
    """A model or tokenizer could not be loaded (offline, wrong id, bad checkpoint)."""


def is_tiny(name: str) -> bool:
    return name in TINY_MODELS


def tiny_size(name: str) -> str:
    try:
        return TINY_MODELS[name]
    except KeyError:
        raise ModelLoadError(f"unknown embedded model {name!r}; use one of {', '.join(TINY_MODELS)}") from None


__all__ = ["DEFAULT_MODEL", "TINY_MODELS", "TINY_SIZES", "ModelLoadError", "is_tiny", "tiny_size"]
