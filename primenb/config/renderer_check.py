"""The model -> renderer decision upstream makes at config time.

RL (`OrchestratorConfig.validate_renderer_auto_resolves`): with `[orchestrator.renderer] name =
"auto"` (the default), the tokenizer's model id (`tokenizer.name`, else the model's name) must be
a key of the `renderers` package's `MODEL_RENDERER_MAP`, exactly: prime-rl refuses the silent
fallback to `DefaultRenderer`. SFT (`SFTConfig.validate_typed_renderer`) needs a typed renderer
whenever it renders real samples: `auto` must resolve the same way, and `default` is refused.

The map is the installed package's where its version differs from the generated table's
(`renderer_map.py`, the same facts without importing renderers, its openai and tiktoken: a plain
`pip install primenb` has no renderers), and that table otherwise.
primenb's embedded models (`primenb/tiny-byte*`) have no chat template and no hub repository:
upstream cannot load them at all, and the local engine renders them itself, so the rule does not
apply to them.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

from primenb.config.positions import Path
from primenb.config.problem import Problem
from primenb.protocol.fields import DEFAULT_MODEL

EMBEDDED_PREFIX = DEFAULT_MODEL.split("/")[0] + "/"


@cache
def renderer_map() -> Mapping[str, str]:
    """`renderers.base.MODEL_RENDERER_MAP` of the installed package, or the generated table."""
    import importlib.metadata

    from primenb.config import renderer_map as table

    try:
        installed = importlib.metadata.version("renderers")
    except importlib.metadata.PackageNotFoundError:
        return table.MODEL_RENDERER_MAP
    if installed == table.RENDERERS_VERSION:
        return table.MODEL_RENDERER_MAP
    try:
        from renderers.base import MODEL_RENDERER_MAP
    except Exception:  # a broken install: the table is upstream's decision for its version
        return table.MODEL_RENDERER_MAP
    return dict(MODEL_RENDERER_MAP)


def _model_id(model: Any, tokenizer: Any, at: Path) -> tuple[str, Path]:
    """The id the renderer is chosen by, and where the config says it."""
    if tokenizer is not None and tokenizer.name:
        return tokenizer.name, at + ("tokenizer", "name")
    return model.name, at + ("model", "name")


def _shown(model_id: str) -> str:
    """The id as a message can print it: control characters (an `\\e[0m` escape) spelled out."""
    return model_id if model_id.isprintable() else repr(model_id)[1:-1]


def _resolves(model_id: str) -> bool:
    return model_id in renderer_map() or model_id.startswith(EMBEDDED_PREFIX)


def _near(model_id: str) -> str:
    """A mapped id the user probably meant (case, padding, a suffix), as a hint's opening."""
    known = list(renderer_map())
    folded = {k.casefold(): k for k in known}
    exact = folded.get(model_id.strip().casefold())
    close = [exact] if exact else difflib.get_close_matches(model_id, known, n=1, cutoff=0.85)
    return f"did you mean `{close[0]}` (the map is matched exactly)? Otherwise " if close else ""


def rl_renderer(c: Any) -> Iterator[Problem]:
    o = c.orchestrator
    if o.renderer.name != "auto":
        return
    model_id, at = _model_id(o.model, o.tokenizer, ("orchestrator",))
    shared = c.tokenizer if at[-2] == "tokenizer" else c.model
    if shared is not None and shared.name == model_id:
        at = at[1:]  # the shared [model] / [tokenizer] name the file writes
    if _resolves(model_id):
        return
    yield Problem(
        at,
        f"renderer `auto` cannot resolve `{_shown(model_id)}`: it is not in the renderers package's "
        "MODEL_RENDERER_MAP, and prime-rl refuses to fall back to DefaultRenderer silently",
        _near(model_id) + 'set [orchestrator.renderer] name = "default" (a fine-tune or mirror with its own chat '
        "template) or the renderer of its model family (`qwen3`, `prime-qwen3`, ...)",
    )


def sft_renderer(c: Any) -> Iterator[Problem]:
    if c.data.type == "fake" and c.val is None:
        return  # nothing real is rendered
    model_id, at = _model_id(c.model, c.tokenizer, ())
    if c.renderer.name == "default":
        yield Problem(
            ("renderer", "name"),
            "SFT needs a typed renderer (sampled-token and content attribution); "
            '`name = "default"` selects DefaultRenderer',
            f"name the renderer of `{_shown(model_id)}`'s family (`qwen3`, ...) when its chat template matches",
        )
    elif c.renderer.name == "auto" and not _resolves(model_id):
        yield Problem(
            at,
            f"SFT needs a typed renderer, and renderer `auto` finds none for `{_shown(model_id)}` (not in the "
            "renderers package's MODEL_RENDERER_MAP)",
            _near(model_id) + "set [renderer] name = the renderer of its model family when its chat template matches",
        )


__all__ = ["EMBEDDED_PREFIX", "renderer_map", "rl_renderer", "sft_renderer"]
