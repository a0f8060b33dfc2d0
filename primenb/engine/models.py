"""Models and tokenizers: the embedded tiny byte-level default, hub models, and checkpoints.

``primenb/tiny-byte`` (= ``-xs``), ``primenb/tiny-byte-xs``, ``-s``, ``-m`` are random-init
Qwen2 models built from a config (deterministic from the seed) with a 260-token byte-level
tokenizer built in code: nothing is downloaded. Any other id loads through
``AutoModelForCausalLM`` / ``AutoTokenizer`` the normal way.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config

from primenb.engine.chat import TINY_CHAT_TEMPLATE
from primenb.engine.hub import hub_unreachable
from primenb.engine.models_info import (
    TINY_MODELS,
    TINY_SIZES,
    ModelLoadError,
    is_tiny,
    tiny_size,
)
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.rundir import RunDir, checkpoint_step

log = logging.getLogger("primenb.engine")

SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>")  # ids 0..3; byte b is id 4 + b


# ---------------------------------------------------------------------------------------------
# byte-level tokenizer


def _byte_to_char() -> dict[int, str]:
    """The printable stand-in character for each byte (the GPT-2 ByteLevel alphabet)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    mapping = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def build_byte_tokenizer(model_max_length: int = 2048) -> PreTrainedTokenizerFast:
    """260 tokens: ``<pad>``=0, ``<eos>``=1, ``<bos>``=2, ``<unk>``=3, then the 256 bytes.

    Encoding adds no special tokens; any UTF-8 text round-trips.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for b, ch in _byte_to_char().items():
        vocab[ch] = len(SPECIAL_TOKENS) + b
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
        unk_token="<unk>",
        model_max_length=model_max_length,
    )
    tok.padding_side = "right"
    tok.chat_template = TINY_CHAT_TEMPLATE  # conversations and tools (primenb.engine.chat)
    return tok


# ---------------------------------------------------------------------------------------------
# tiny models


def tiny_config(size: str = "xs", *, max_position_embeddings: int = 2048) -> Qwen2Config:
    dims = TINY_SIZES[size]
    return Qwen2Config(
        vocab_size=len(SPECIAL_TOKENS) + 256,
        hidden_size=dims["hidden"],
        intermediate_size=dims["ffn"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["heads"],
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )


def build_tiny_model(name_or_size: str = "xs", seed: int = 0) -> torch.nn.Module:
    """A random-init tiny Qwen2 model; the same ``seed`` gives the same weights."""
    size = tiny_size(name_or_size) if "/" in name_or_size else name_or_size
    if size not in TINY_SIZES:
        raise ModelLoadError(f"unknown tiny model size {name_or_size!r}; use one of {TINY_MODELS}")
    cfg = tiny_config(size)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.config.name_or_path = f"primenb/tiny-byte-{size}"
    model.generation_config.pad_token_id = 0
    model.generation_config.eos_token_id = 1
    model.generation_config.bos_token_id = 2
    return model


def param_hash(model: torch.nn.Module) -> str:
    """A hash of every parameter's bytes (for determinism checks)."""
    import hashlib

    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# loading


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


def load_tokenizer(name: str, *, local_files_only: bool = False) -> Any:
    """``AutoTokenizer``, except that a folder saved from a plain ``tokenizers`` tokenizer (like
    the byte-level one) reloads as exactly that, not as the model type's tokenizer class (which
    in transformers 5 adds a normalizer and a pre-tokenizer split)."""
    cfg_path = Path(name).expanduser() / "tokenizer_config.json"
    if cfg_path.is_file():
        try:
            cls = json.loads(cfg_path.read_text()).get("tokenizer_class")
        except (OSError, json.JSONDecodeError):
            cls = None
        if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(str(cfg_path.parent))
    return AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)


def load_pretrained(name: str, **kwargs: Any) -> tuple[Any, Any]:
    """``AutoModelForCausalLM`` + ``AutoTokenizer`` from a hub id or a local folder.

    When the hub is unreachable, only the local cache is tried. Raises `ModelLoadError` with a
    short reason (no hub traceback) when it cannot load.
    """
    local_dir = Path(name).expanduser().is_dir()
    offline = not local_dir and hub_unreachable()
    if offline:
        kwargs["local_files_only"] = True
    try:
        tokenizer = load_tokenizer(name, local_files_only=offline)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32, **kwargs)
    except Exception as exc:  # hub/OSError/ValueError: all mean "cannot load this model here"
        where = (
            "the Hugging Face hub is not reachable from this machine and the model is not in the local cache"
            if offline
            else _short(exc)
        )
        raise ModelLoadError(
            f'Could not load model {name!r}: {where}. Use model.name = "primenb/tiny-byte" '
            f"(built in, no download), or download the model first (e.g. `hf download {name}` "
            f"on a machine with internet) and train again."
        ) from exc
    return model, tokenizer


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder from ``path``: a checkpoint itself, a ``checkpoints/`` folder or a run
    directory (both: the latest ``step_N``)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ModelLoadError(f"init_from: {p} does not exist")
    if CheckpointDir(p).is_checkpoint():
        return p
    for base in (RunDir(p).checkpoints, p):
        steps = sorted((n, c) for c in base.glob("step_*") if (n := checkpoint_step(c.name)) is not None and c.is_dir())
        if steps:
            return steps[-1][1]
    return p


def load_base(source: dict[str, Any]) -> tuple[Any, Any]:
    """Model + tokenizer from a base description ``{"name", "seed", "path"}``."""
    path = source.get("path")
    if path:
        return load_pretrained(str(path))
    name = str(source.get("name") or "primenb/tiny-byte")
    if is_tiny(name):
        return build_tiny_model(name, int(source.get("seed") or 0)), build_byte_tokenizer()
    return load_pretrained(name)


def _has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer_config.json").exists() or (folder / "tokenizer.json").exists()


def load_model(model_name: str, *, seed: int = 0, init_from: str | None = None) -> tuple[Any, Any, dict[str, Any]]:
    """``(model, tokenizer, base)`` for a run.

    ``base`` describes the weights below any LoRA adapter (``{"name", "seed", "path"}``) and is
    written into every checkpoint so an adapter can be loaded again later. With ``init_from``
    a full checkpoint loads as is; an adapter checkpoint loads onto its recorded base as a
    trainable ``PeftModel``.
    """
    if not init_from:
        base = {"name": model_name, "seed": seed, "path": None}
        if not is_tiny(model_name) and Path(model_name).expanduser().is_dir():
            base["path"] = str(Path(model_name).expanduser().resolve())
        model, tok = load_base(base)
        return model, _fix_tokenizer(tok, model), base

    ckpt = resolve_checkpoint(init_from)
    folder = CheckpointDir(ckpt)
    if folder.is_adapter():
        from peft import PeftModel

        meta = folder.read_meta()
        base = meta.get("base") or {"name": _adapter_base_name(ckpt), "seed": seed, "path": None}
        model, tok = load_base(base)
        if _has_tokenizer(ckpt):
            tok = load_tokenizer(str(ckpt))
        try:
            model = PeftModel.from_pretrained(model, str(ckpt), is_trainable=True)
        except Exception as exc:
            raise ModelLoadError(f"init_from: could not load adapter {ckpt} ({_short(exc)})") from exc
        log.info("init_from adapter %s on base %s", ckpt, base)
        return model, _fix_tokenizer(tok, model), base
    if not folder.is_full_model():
        raise ModelLoadError(
            f"init_from: {ckpt} is not a checkpoint (no {CheckpointDir.MODEL_CONFIG} or {CheckpointDir.ADAPTER_CONFIG})"
        )
    model, tok = load_pretrained(str(ckpt))
    log.info("init_from full checkpoint %s", ckpt)
    return model, _fix_tokenizer(tok, model), {"name": model_name, "seed": seed, "path": str(ckpt)}


def _adapter_base_name(ckpt: Path) -> str:
    return CheckpointDir(ckpt).adapter_base_name() or "primenb/tiny-byte"


def _fix_tokenizer(tok: Any, model: Any) -> Any:
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
    gen = getattr(model, "generation_config", None)
    if gen is not None and gen.pad_token_id is None:
        gen.pad_token_id = tok.pad_token_id
    return tok


__all__ = [
    "SPECIAL_TOKENS",
    "build_byte_tokenizer",
    "build_tiny_model",
    "load_model",
    "load_pretrained",
    "load_tokenizer",
    "param_hash",
    "resolve_checkpoint",
    "tiny_config",
]
