"""A trace's trained model for inference: resolve the trace, then hand the engine what it needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.errors import PrimenbError
from primenb.protocol.fields import DEFAULT_MODEL, SETTINGS, detect_mode, get_path
from primenb.traces.trace import Trace, get

if TYPE_CHECKING:
    from primenb.engine.inference import Trained


def _default_tokens(trace: Trace) -> int:
    """The run's own answer budget (`SETTINGS["answer_tokens"]`), else 64."""
    config = trace.config
    for path in SETTINGS["answer_tokens"].paths(detect_mode(config)):
        node = get_path(config, path)
        if isinstance(node, int) and not isinstance(node, bool) and node > 0:
            return node
    return 64


def trained(ref: Any, checkpoint: str | None = None) -> Trained:
    """The engine's view of a trace's model (its final checkpoint, or ``checkpoint``)."""
    trace = get(ref)
    ckpt = Path(checkpoint) if checkpoint else trace.final_checkpoint
    if checkpoint is None and (ckpt is None or not ckpt.is_dir()):
        from primenb.backends import capabilities, get_backend

        backend = str(trace.get("backend") or "local")
        if capabilities(backend).fetches_checkpoints:  # e.g. the latest READY one on the platform
            ckpt = get_backend(backend).fetch_checkpoint(trace.run_dir)
    if ckpt is None or not ckpt.is_dir():
        missing = f" ({ckpt} is missing)" if ckpt else ""
        raise PrimenbError(f"trace {trace.id} ({trace.name}) has no checkpoint to load{missing}")
    return describe(trace, ckpt)


def describe(trace: Trace, ckpt: Path) -> Trained:
    """A trace's model with its checkpoint at ``ckpt``, unchecked: a path on another host (a
    trace served where it trained) cannot be checked here."""
    from primenb.engine.inference import Trained

    base_seed = (trace.model.get("base") or {}).get("seed") or (trace.config.get("primenb") or {}).get("seed") or 0
    return Trained(
        key=trace.id,
        model_id=str(trace.model.get("id") or DEFAULT_MODEL),
        checkpoint=ckpt,
        base_seed=int(base_seed),
        env_sources=list((trace.data.get("train") or {}).get("sources") or []),
        default_tokens=_default_tokens(trace),
    )


def load(ref: Any, *, checkpoint: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a trace's final checkpoint, adapter applied, in eval mode."""
    from primenb.engine.inference import load as engine_load

    return engine_load(trained(ref, checkpoint), device=device)


def generate(ref: Any, prompts: Any, *, checkpoint: str | None = None, **sampling: Any) -> Any:
    """Completions from a trace's model (greedy by default; see `primenb.engine.inference.generate`)."""
    from primenb.engine.inference import generate as engine_generate

    return engine_generate(trained(ref, checkpoint), prompts, **sampling)
