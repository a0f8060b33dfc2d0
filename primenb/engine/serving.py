"""The models behind ``%prime_serve``: one copy of each base model in memory, every LoRA adapter
trained on it loaded next to it (PEFT multi-adapter), and generation for one served model id at a
time. Imported only by the server process (`primenb.serve.worker`).

A request picks its adapter with ``set_adapter`` (the base itself runs with the adapters disabled);
all generation happens on one worker thread, so switching never races. A full (non-adapter)
checkpoint is its own model and shares nothing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList

from primenb.engine.evaluation import render_prompts
from primenb.engine.models import (
    _fix_tokenizer,
    _has_tokenizer,
    load_base,
    load_model,
    load_tokenizer,
    read_meta,
    resolve_checkpoint,
)
from primenb.engine.models_info import ModelLoadError, is_tiny
from primenb.engine.serve_errors import ServeError


@dataclass
class _Base:
    key: str
    model: Any  # a PeftModel once an adapter is loaded on it
    tokenizer: Any
    adapters: dict[str, str] = field(default_factory=dict)  # served id -> PEFT adapter name
    counter: int = 0


@dataclass
class Entry:
    """One served model id."""

    id: str
    kind: str  # "base" | "adapter" | "full"
    base_key: str
    adapter: str | None = None  # PEFT adapter name (kind "adapter")
    model: Any = None  # own model (kind "full")
    tokenizer: Any = None
    text_template: str | None = None  # the trace's environment prompt format ("{prompt}=")
    trace: str | None = None
    checkpoint: str | None = None


def _base_key(desc: dict[str, Any]) -> str:
    return json.dumps({k: desc.get(k) for k in ("name", "seed", "path")}, sort_keys=True)


def _base_desc(model_name: str, seed: int) -> dict[str, Any]:
    path = None
    if not is_tiny(model_name) and Path(model_name).expanduser().is_dir():
        path = str(Path(model_name).expanduser().resolve())
    return {"name": model_name, "seed": seed, "path": path}


class ModelPool:
    """Served ids and the weights behind them. Not thread-safe: call it from one thread."""

    def __init__(self) -> None:
        self.bases: dict[str, _Base] = {}
        self.entries: dict[str, Entry] = {}
        self._lock = threading.Lock()

    # -- loading ---------------------------------------------------------------------------------
    def _base(self, desc: dict[str, Any]) -> _Base:
        key = _base_key(desc)
        if key not in self.bases:
            model, tok = load_base(desc)
            model.eval()
            self.bases[key] = _Base(key, model, _fix_tokenizer(tok, model))
        return self.bases[key]

    def add_base(self, served_id: str, model_name: str, *, seed: int = 0) -> Entry:
        base = self._base(_base_desc(model_name, seed))
        entry = Entry(served_id, "base", base.key)
        self.entries[served_id] = entry
        return entry

    def add_checkpoint(
        self,
        served_id: str,
        checkpoint: str,
        *,
        model_name: str,
        seed: int = 0,
        text_template: str | None = None,
        trace: str | None = None,
    ) -> Entry:
        """Serve a checkpoint under ``served_id``: an adapter joins its base, a full model loads."""
        if served_id in self.entries:
            raise ServeError(f"model {served_id!r} is already served", 409)
        ckpt = Path(checkpoint)
        if not ckpt.is_dir():
            raise ServeError(f"checkpoint {ckpt} does not exist (was it deleted?)", 404)
        ckpt = resolve_checkpoint(ckpt)
        if (ckpt / "adapter_config.json").exists():
            meta = read_meta(ckpt)
            base = self._base(meta.get("base") or _base_desc(model_name, seed))
            base.counter += 1
            name = f"a{base.counter}"  # PEFT adapter names end up in module keys: no dots
            try:
                if hasattr(base.model, "load_adapter") and hasattr(base.model, "peft_config"):
                    base.model.load_adapter(str(ckpt), adapter_name=name)
                else:
                    from peft import PeftModel

                    base.model = PeftModel.from_pretrained(base.model, str(ckpt), adapter_name=name)
                base.model.eval()
            except Exception as exc:
                raise ServeError(f"could not load adapter {ckpt}: {type(exc).__name__}: {exc}", 400) from exc
            tok = load_tokenizer(str(ckpt)) if _has_tokenizer(ckpt) else base.tokenizer
            base.adapters[served_id] = name
            entry = Entry(served_id, "adapter", base.key, adapter=name, tokenizer=_fix_tokenizer(tok, base.model))
        else:
            try:
                model, tok, _ = load_model(model_name, seed=seed, init_from=str(ckpt))
            except ModelLoadError as exc:
                raise ServeError(str(exc), 400) from exc
            model.eval()
            entry = Entry(served_id, "full", _base_key({"path": str(ckpt)}), model=model, tokenizer=tok)
        entry.text_template = text_template
        entry.trace = trace
        entry.checkpoint = str(ckpt)
        self.entries[served_id] = entry
        return entry

    def remove(self, served_id: str) -> None:
        entry = self.entries.pop(served_id, None)
        if entry is None:
            raise ServeError(f"model {served_id!r} is not served", 404)
        if entry.kind == "adapter":
            base = self.bases[entry.base_key]
            base.adapters.pop(served_id, None)
            if base.adapters:
                base.model.set_adapter(next(iter(base.adapters.values())))
                base.model.delete_adapter(entry.adapter)
            else:  # the last adapter: back to the plain base (PEFT cannot delete its only adapter)
                base.model = base.model.unload()
        if not any(e.base_key == entry.base_key for e in self.entries.values()):
            self.bases.pop(entry.base_key, None)  # nothing uses these weights any more

    def weight_bytes(self) -> int:
        """Bytes of every tensor the served models hold, each storage counted once (a base shared
        by its adapters counts once)."""
        seen: set[int] = set()
        total = 0
        models = [b.model for b in self.bases.values()] + [
            e.model for e in self.entries.values() if e.model is not None
        ]
        for model in models:
            for t in [*model.parameters(), *model.buffers()]:
                ptr = t.untyped_storage().data_ptr()
                if ptr not in seen:
                    seen.add(ptr)
                    total += t.untyped_storage().nbytes()
        return total

    # -- generation ------------------------------------------------------------------------------
    def _model_tok(self, entry: Entry) -> tuple[Any, Any]:
        if entry.kind == "full":
            return entry.model, entry.tokenizer
        base = self.bases[entry.base_key]
        return base.model, entry.tokenizer or base.tokenizer

    def entry(self, served_id: str) -> Entry:
        entry = self.entries.get(served_id)
        if entry is None:
            known = ", ".join(sorted(self.entries)) or "none"
            raise ServeError(f"The model {served_id!r} does not exist. Served models: {known}.", 404, "model")
        return entry

    def prompt_format(self, entry: Entry) -> str:
        """How `render` shows chat messages to this model: ``chat_template``, ``text_template``
        (the trace's environment format) or ``raw`` (the last user message as is)."""
        _, tok = self._model_tok(entry)
        if tok.chat_template is not None:
            return "chat_template"
        return "text_template" if entry.text_template else "raw"

    def context_limit(self, entry: Entry) -> int:
        model, _ = self._model_tok(entry)
        return int(getattr(model.config, "max_position_embeddings", 0) or 2048)

    def render(self, entry: Entry, prompt: str | list[dict[str, Any]]) -> tuple[str, bool]:
        """The text the model sees, and whether it already holds special tokens. Messages use the
        tokenizer's chat template; without one, the last user message in the trace's prompt format."""
        _, tok = self._model_tok(entry)
        if isinstance(prompt, str):
            return prompt, False
        if tok.chat_template is not None:
            texts, templated = render_prompts(tok, [prompt])
            return texts[0], templated
        users = [str(m.get("content") or "") for m in prompt if m.get("role") == "user"]
        text = users[-1] if users else "\n".join(str(m.get("content") or "") for m in prompt)
        if entry.text_template:
            text = entry.text_template.replace("{prompt}", text).replace("{system_prompt}", "")
        return text, False

    def count(self, entry: Entry, text: str, templated: bool) -> int:
        _, tok = self._model_tok(entry)
        return len(tok(text, add_special_tokens=not templated)["input_ids"])

    def generate(
        self,
        entry: Entry,
        text: str,
        templated: bool,
        *,
        max_tokens: int,
        temperature: float,
        top_p: float,
        n: int,
        seed: int | None,
        stop: list[str],
        on_text: Callable[[int, str], None] | None = None,
    ) -> list[dict[str, Any]]:
        """``n`` completions of one prompt: ``{"text", "finish_reason", "completion_tokens"}`` each,
        plus ``prompt_tokens`` in the first. ``on_text(i, delta)`` streams completion ``i``."""
        model, tok = self._model_tok(entry)
        with self._lock:
            if entry.kind == "adapter":
                model.set_adapter(entry.adapter)
                ctx: Any = _nullcontext()
            elif entry.kind == "base" and hasattr(model, "disable_adapter"):
                ctx = model.disable_adapter()
            else:
                ctx = _nullcontext()
            enc = tok([text], return_tensors="pt", add_special_tokens=not templated)
            enc = enc.to(next(model.parameters()).device)
            prompt_len = int(enc["input_ids"].shape[1])
            kwargs: dict[str, Any] = {
                "max_new_tokens": max(1, max_tokens),
                "pad_token_id": tok.pad_token_id,
                "eos_token_id": tok.eos_token_id,
            }
            if temperature > 0:
                kwargs.update(do_sample=True, temperature=float(temperature), top_p=float(top_p), top_k=0)
            else:
                kwargs["do_sample"] = False
            results = []
            with ctx, torch.no_grad(), torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(int(seed))
                for i in range(n):  # one at a time: streaming and stop strings stay per completion
                    results.append(self._one(model, tok, enc, prompt_len, kwargs, stop, i, on_text))
            results[0]["prompt_tokens"] = prompt_len
            return results

    def _one(
        self,
        model: Any,
        tok: Any,
        enc: Any,
        prompt_len: int,
        kwargs: dict[str, Any],
        stop: list[str],
        index: int,
        on_text: Callable[[int, str], None] | None,
    ) -> dict[str, Any]:
        watcher = _StopWatcher(tok, prompt_len, stop, index, on_text)
        out = model.generate(**enc, **kwargs, stopping_criteria=StoppingCriteriaList([watcher]))
        new = out[0, prompt_len:].tolist()
        eos = tok.eos_token_id
        if eos in new:
            new = new[: new.index(eos)]
            finish = "stop"
        else:
            finish = "length"
        text = tok.decode(new, skip_special_tokens=True)
        cut = _cut_at_stop(text, stop)
        if cut is not None:
            text, finish = cut, "stop"
        watcher.flush(text)
        return {"text": text, "finish_reason": finish, "completion_tokens": len(new)}


class _StopWatcher(StoppingCriteria):
    """Ends generation at a stop string and streams the text decoded so far (never past a stop)."""

    def __init__(self, tok: Any, start: int, stop: list[str], index: int, on_text: Any) -> None:
        self.tok, self.start, self.stop, self.index, self.on_text = tok, start, stop, index, on_text
        self.sent = 0
        self.hold = max((len(s) for s in stop), default=0)  # a stop string may still be forming

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> Any:
        ids = input_ids[0, self.start :].tolist()
        if self.tok.eos_token_id in ids:
            ids = ids[: ids.index(self.tok.eos_token_id)]
        text = self.tok.decode(ids, skip_special_tokens=True)
        done = _cut_at_stop(text, self.stop) is not None
        if self.on_text is not None and not done:
            safe = len(text) - self.hold
            if text.endswith("\ufffd"):  # half a multi-byte character: wait for the rest
                safe = min(safe, len(text.rstrip("\ufffd")))
            if safe > self.sent:
                self.on_text(self.index, text[self.sent : safe])
                self.sent = safe
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)

    def flush(self, final: str) -> None:
        if self.on_text is not None and len(final) > self.sent:
            self.on_text(self.index, final[self.sent :])
            self.sent = len(final)


def _cut_at_stop(text: str, stop: list[str]) -> str | None:
    hits = [text.find(s) for s in stop if s and s in text]
    return text[: min(hits)] if hits else None


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


__all__ = ["Entry", "ModelPool", "ServeError"]
