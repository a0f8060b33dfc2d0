"""A trace's trained model for inference: resolve the trace, then hand the engine what it needs."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.errors import PrimenbError
from primenb.protocol.fields import DEFAULT_ANSWER_TOKENS, DEFAULT_MODEL, SETTINGS, detect_mode, get_path
from primenb.traces.trace import Trace, get

if TYPE_CHECKING:
    from primenb.engine.inference import Trained


def _default_tokens(trace: Trace) -> int:
    """The run's own answer budget (`SETTINGS["answer_tokens"]`), else `DEFAULT_ANSWER_TOKENS`."""
    config = trace.config
    for path in SETTINGS["answer_tokens"].paths(detect_mode(config)):
        node = get_path(config, path)
        if isinstance(node, int) and not isinstance(node, bool) and node > 0:
            return node
    return DEFAULT_ANSWER_TOKENS


class PlainFormat:
    """An untrusted trace's recorded prompt format, as data: no environment code is built."""

    def __init__(self, template: str | None) -> None:
        self.template = template

    def format_prompt(self, prompt: Any, *, chat: bool) -> Any:
        if chat:
            return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
        text = prompt if isinstance(prompt, str) else str(prompt)
        return self.template.replace("{prompt}", text).replace("{system_prompt}", "") if self.template else text


def prompt_environment(trace: Trace, verb: str, *, trust: bool = False) -> Callable[[], Any] | None:
    """What shows a prompt to the trace's model as in training, built when asked, through the trust
    road (`primenb.traces.trust`): the environment, or for an untrusted imported trace its recorded
    prompt format as plain data (with a warning saying how to trust it)."""
    from primenb.traces import trust as road

    found = road.sources(trace)
    if not found:
        return None
    src = found[0]

    def build() -> Any:
        try:
            return road.environment(src["env_id"], src["args"], trace=trace, verb=verb, trust=trust)
        except road.UntrustedTrace as exc:
            warnings.warn(f"{exc}; until then its recorded prompt format is used as plain data", stacklevel=4)
            return PlainFormat(road.prompt_format(trace, verb))
        except Exception as exc:
            raise PrimenbError(f"environment {src['env_id'][:200]!r} cannot be built here ({exc})") from None

    return build


def trained(ref: Any, checkpoint: str | None = None, *, trust: bool = False) -> Trained:
    """The engine's view of a trace's model (its final checkpoint, or ``checkpoint``)."""
    trace = get(ref)
    ckpt = Path(checkpoint) if checkpoint else trace.final_checkpoint
    if checkpoint is None and (ckpt is None or not ckpt.is_dir()):
        from primenb.backends import capabilities, get_backend

        backend = trace.get("backend")  # none recorded: the default backend's, which fetches nothing
        if capabilities(backend).fetches_checkpoints:  # e.g. the latest READY one on the platform
            ckpt = get_backend(str(backend)).fetch_checkpoint(trace.run_dir)
    if ckpt is None or not ckpt.is_dir():
        missing = f" ({ckpt} is missing)" if ckpt else ""
        raise PrimenbError(f"trace {trace.id} ({trace.name}) has no checkpoint to load{missing}")
    return describe(trace, ckpt, trust=trust)


MAX_SEED = 2**63 - 1  # what every seeded library takes


class TraceFieldError(PrimenbError):
    """A field inference needs has the wrong type in a trace: that trace's problem, named."""


def _field_error(trace: Trace, field: str, value: Any, want: str) -> TraceFieldError:
    shown = repr(value)[:80] if value is not _DROPPED else "a value of the wrong type (left out when read)"
    return TraceFieldError(
        f"trace {trace.id} ({trace.name[:80]}): {field} in its trace.json is {shown}, not {want}; its model "
        "cannot be rebuilt from it (other traces are not affected). Fix the field in trace.json, or "
        "re-import the trace from a good bundle"
    )


_DROPPED = object()  # the typed reader left a wrong-typed field out: its warning names it


def _dropped(trace: Trace, field: str) -> bool:
    """Whether the typed reader (`primenb.protocol.documents.TraceDoc`) left ``field`` (or a part
    above it) out of the trace as read."""
    parts = field.split(".")
    above = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    for warning in getattr(trace.doc, "warnings", ()):
        loc = str(warning).removeprefix("trace.json: ").split(":", 1)[0]
        if loc in above:
            return True
    return False


def model_of(trace: Trace) -> tuple[str, int]:
    """``(model id, base seed)`` of a trace, typed: every field read here is checked, so a wrong type
    (an imported trace's ``model.base = "x"``, a seed ``"abc"``) raises `TraceFieldError` naming
    the trace and the field, never a traceback. The seed comes from ``model.base.seed``, else the
    config's ``[primenb] seed``, else 0."""
    doc = trace.doc
    model = doc.get("model")
    if model is None and _dropped(trace, "model"):
        raise _field_error(trace, "model", _DROPPED, "an object")
    if model is not None and not isinstance(model, dict):
        raise _field_error(trace, "model", model, "an object")
    model = model or {}
    model_id = model.get("id")
    if model_id is None and _dropped(trace, "model.id"):
        raise _field_error(trace, "model.id", _DROPPED, "a model name")
    if model_id is not None and not (isinstance(model_id, str) and model_id.strip()):
        raise _field_error(trace, "model.id", model_id, "a model name")
    base = model.get("base")
    if base is None and _dropped(trace, "model.base"):
        raise _field_error(trace, "model.base", _DROPPED, "an object")
    if base is not None and not isinstance(base, dict):
        raise _field_error(trace, "model.base", base, "an object")
    field, seed = "model.base.seed", (base or {}).get("seed")
    if seed is None and _dropped(trace, field):
        raise _field_error(trace, field, _DROPPED, f"an integer seed from 0 to {MAX_SEED}")
    if seed is None:
        config = doc.get("config")
        primenb = config.get("primenb") if isinstance(config, dict) else None
        if primenb is not None and not isinstance(primenb, dict):
            raise _field_error(trace, "config.primenb", primenb, "a table")
        field, seed = "config.primenb.seed", (primenb or {}).get("seed")
    if seed is None:
        seed = 0
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise _field_error(trace, field, seed, f"an integer seed from 0 to {MAX_SEED}")
    return (model_id or DEFAULT_MODEL), seed


def describe(trace: Trace, ckpt: Path, *, trust: bool = False) -> Trained:
    """A trace's model with its checkpoint at ``ckpt``, unchecked: a path on another host (a
    trace served where it trained) cannot be checked here. Its fields are read typed
    (`model_of`): a wrong one raises `TraceFieldError` naming the trace."""
    from primenb.engine.inference import Trained

    model_id, base_seed = model_of(trace)
    return Trained(
        key=trace.id,
        model_id=model_id,
        checkpoint=ckpt,
        base_seed=base_seed,
        environment=prompt_environment(trace, "generate", trust=trust),
        default_tokens=_default_tokens(trace),
    )


def load(ref: Any, *, checkpoint: str | None = None, device: str | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of a trace's final checkpoint, adapter applied, in eval mode."""
    from primenb.engine.inference import load as engine_load

    return engine_load(trained(ref, checkpoint), device=device)


def generate(ref: Any, prompts: Any, *, checkpoint: str | None = None, trust: bool = False, **sampling: Any) -> Any:
    """Completions from a trace's model (greedy by default; see `primenb.engine.inference.generate`).
    An imported trace's environment is built only with ``trust``; until then its recorded prompt
    format is used as plain data."""
    from primenb.engine.inference import generate as engine_generate

    return engine_generate(trained(ref, checkpoint, trust=trust), prompts, **sampling)
