"""The models behind ``%prime_serve``: one copy of each set of weights in memory, every LoRA adapter
trained on it loaded next to it (PEFT multi-adapter), each served under an id. Imported only by the
server process (`primenb.serve.worker`); driven from the scheduler's thread
(`primenb.engine.batching`), which decodes every served id's requests together.

Weights are keyed by what they are: a named base (name + seed of the embedded model), or a folder
(a full fine-tune, a warm-up checkpoint an adapter was trained on). So an adapter trained after an
SFT warm-up sits on that warm-up's weights, and serving both loads them once.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from primenb.engine.chat import ChatRenderer, Conversation, trains_on_chat
from primenb.engine.models import (
    _fix_tokenizer,
    _has_tokenizer,
    load_base,
    load_tokenizer,
    resolve_checkpoint,
)
from primenb.engine.models_info import ModelLoadError, is_tiny
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.protocol import reader
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.stage import FINAL, Stage
from primenb.protocol.weights import ADAPTER, BASE, FULL, Weights


@dataclass
class _Weights:
    key: str
    model: Any  # a PeftModel once an adapter is loaded on it
    tokenizer: Any
    adapters: dict[str, str] = field(default_factory=dict)  # served id -> PEFT adapter name
    counter: int = 0


LIVE: Literal["live"] = "live"  # a trainer's module served as it is (the policy server's)


@dataclass
class Entry:
    """One served model id: ``kind`` base (weights as named), adapter (LoRA on ``base_key``'s
    weights) or full (a fine-tune with weights of its own)."""

    id: str
    kind: Weights | Literal["live"]
    base_key: str
    adapter: str | None = None  # PEFT adapter name (kind ADAPTER)
    tokenizer: Any = None  # an adapter's own tokenizer, when its checkpoint has one
    text_template: str | None = None  # the trace's environment prompt format ("{prompt}=")
    trace: str | None = None
    checkpoint: str | None = None
    root: str = ""  # the base model everything here started from
    parent: str | None = None  # the model this one was trained on (None for a base)
    stage: Stage = FINAL  # SFT_WARMUP: the warm-up model a trace's adapter was trained on
    chat_trained: bool = False  # its checkpoint note says it trained on chat-template conversations


def _weights_key(desc: dict[str, Any]) -> str:
    """Weights from a folder are that folder; a named model is its name and seed."""
    if desc.get("path"):
        return f"path:{Path(str(desc['path'])).expanduser().resolve()}"
    return f"name:{desc.get('name')}#{int(desc.get('seed') or 0)}"


def _base_desc(model_name: str, seed: int) -> dict[str, Any]:
    path = None
    if not is_tiny(model_name) and Path(model_name).expanduser().is_dir():
        path = str(Path(model_name).expanduser().resolve())
    return {"name": model_name, "seed": seed, "path": path}


def cpu_threads() -> None:
    """Decode on the CPU with one core fewer than the process may use (``PRIMENB_SERVE_THREADS``
    overrides): the event loop streams tokens and the clients usually share the machine, and torch's
    thread pool spin-waits when its cores are taken. Measured on 2 busy cores with the embedded
    model, one request decoded 45 tokens/s with 2 threads and 605 with 1."""
    import torch  # here, not at import: the pool's module is imported before a model is needed

    given = os.environ.get("PRIMENB_SERVE_THREADS", "")
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = int(given) if given.isdigit() and int(given) > 0 else max(1, usable - 1)
    torch.set_num_threads(threads)


class ModelPool:
    """Served ids and the weights behind them, on ``device`` (default: the GPU when there is one).
    Not thread-safe: call it from one thread."""

    def __init__(self, device: str | None = None) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.bases: dict[str, _Weights] = {}
        self.entries: dict[str, Entry] = {}
        self._renderers: dict[int, ChatRenderer] = {}

    # -- loading ---------------------------------------------------------------------------------
    def _weights(self, desc: dict[str, Any]) -> _Weights:
        key = _weights_key(desc)
        if key not in self.bases:
            try:
                model, tok = load_base(desc)
            except ModelLoadError as exc:
                raise ServeError(str(exc), ErrorKind.INVALID) from exc
            model.to(self.device).eval()
            self.bases[key] = _Weights(key, model, _fix_tokenizer(tok, model))
        return self.bases[key]

    def _claim(self, served_id: str) -> None:
        if served_id in self.entries:
            raise ServeError(f"model {served_id!r} is already served", ErrorKind.CONFLICT, "id")

    def add_base(self, served_id: str, model_name: str, *, seed: int = 0) -> Entry:
        self._claim(served_id)
        weights = self._weights(_base_desc(model_name, seed))
        entry = Entry(served_id, BASE, weights.key, root=model_name)
        self.entries[served_id] = entry
        return entry

    def add_live(self, served_id: str, model: Any, tokenizer: Any) -> Entry:
        """Serve ``model`` as it is: the module a trainer is training, not a copy. A PEFT model
        decodes with its active adapter. Its weights are the trainer's: removing it never
        touches them (kind ``live``)."""
        self._claim(served_id)
        key = f"live:{served_id}"
        self.bases[key] = _Weights(key, model, tokenizer)
        adapter = str(model.active_adapter) if hasattr(model, "peft_config") else None
        entry = Entry(served_id, LIVE, key, adapter=adapter, root=str(getattr(model, "name_or_path", "")))
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
        parent: str | None = None,
        stage: Stage = FINAL,
    ) -> Entry:
        """Serve a checkpoint under ``served_id``: an adapter joins the weights it was trained on,
        a full model loads as weights of its own."""
        self._claim(served_id)
        ckpt = Path(checkpoint)
        if not ckpt.is_dir():
            raise ServeError(f"checkpoint {ckpt} does not exist (was it deleted?)", ErrorKind.NOT_FOUND, "checkpoint")
        ckpt = resolve_checkpoint(ckpt)
        folder = CheckpointDir(ckpt)
        meta = folder.read_meta()
        if folder.is_adapter():
            _check_adapter_config(ckpt)
            desc = _note_base(meta) or _base_desc(model_name, seed)
            weights = self._weights(desc)
            weights.counter += 1
            name = f"a{weights.counter}"  # PEFT adapter names end up in module keys: no dots
            try:
                if hasattr(weights.model, "load_adapter") and hasattr(weights.model, "peft_config"):
                    weights.model.load_adapter(str(ckpt), adapter_name=name)
                else:
                    from peft import PeftModel

                    weights.model = PeftModel.from_pretrained(weights.model, str(ckpt), adapter_name=name)
                weights.model.eval()
            except Exception as exc:
                raise ServeError(
                    f"could not load adapter {ckpt}: {type(exc).__name__}: {exc}", ErrorKind.INVALID
                ) from exc
            tok = _fix_tokenizer(load_tokenizer(str(ckpt)), weights.model) if _has_tokenizer(ckpt) else None
            weights.adapters[served_id] = name
            entry = Entry(served_id, ADAPTER, weights.key, adapter=name, tokenizer=tok)
            entry.parent = parent or str(desc.get("path") or desc.get("name") or model_name)
        else:
            weights = self._weights({"path": str(ckpt)})
            entry = Entry(served_id, FULL, weights.key, parent=parent or model_name)
        entry.root = str((_note_base(meta) or {}).get("name") or model_name)
        entry.chat_trained = meta.get("prompt_format") == "chat_template"
        entry.text_template = text_template
        entry.trace = trace
        entry.stage = stage
        entry.checkpoint = str(ckpt)
        self.entries[served_id] = entry
        return entry

    # -- leaving (the scheduler retires an entry once no row decodes on it) -----------------------
    def detach(self, served_id: str) -> Entry:
        """Stop listing ``served_id``: new requests for it get NOT_FOUND; its weights stay for now."""
        entry = self.entries.pop(served_id, None)
        if entry is None:
            raise ServeError(f"model {served_id!r} is not served", ErrorKind.NOT_FOUND, "model")
        return entry

    def release(self, entry: Entry) -> None:
        """Free what only ``entry`` used: its adapter, and the weights once nothing else uses them."""
        weights = self.bases.get(entry.base_key)
        if weights is None:
            return
        if entry.kind == LIVE:  # the trainer's module: forget it, change nothing in it
            self.bases.pop(entry.base_key, None)
            return
        if entry.kind == ADAPTER and entry.adapter is not None:
            weights.adapters = {k: v for k, v in weights.adapters.items() if v != entry.adapter}
            if weights.adapters:
                weights.model.set_adapter(next(iter(weights.adapters.values())))
                weights.model.delete_adapter(entry.adapter)
            else:  # the last adapter: back to the plain weights (PEFT cannot delete its only adapter)
                weights.model = weights.model.unload()
        if not any(e.base_key == entry.base_key for e in self.entries.values()) and not weights.adapters:
            self.bases.pop(entry.base_key, None)  # nothing uses these weights any more
        in_use = {id(self.tokenizer_for(e)) for e in self.entries.values()}
        self._renderers = {k: r for k, r in self._renderers.items() if k in in_use}  # nor its tokenizer

    def weight_bytes(self) -> int:
        """Bytes of every tensor the served models hold, each storage counted once (weights shared
        by adapters count once)."""
        seen: set[int] = set()
        total = 0
        for weights in self.bases.values():
            for t in [*weights.model.parameters(), *weights.model.buffers()]:
                ptr = t.untyped_storage().data_ptr()
                if ptr not in seen:
                    seen.add(ptr)
                    total += t.untyped_storage().nbytes()
        return total

    # -- what the scheduler asks (from its own thread) ---------------------------------------------
    def entry(self, served_id: str) -> Entry:
        entry = self.entries.get(served_id)
        if entry is None:
            known = ", ".join(sorted(self.entries)) or "none"
            raise ServeError(
                f"The model {served_id!r} does not exist. Served models: {known}.",
                ErrorKind.NOT_FOUND,
                "model",
                "model_not_found",
            )
        return entry

    def model_for(self, key: str) -> Any:
        """The weights a batch decodes on: a base (with its adapters) or a full fine-tune."""
        return self.bases[key].model

    def tokenizer_for(self, entry: Entry) -> Any:
        return entry.tokenizer or self.bases[entry.base_key].tokenizer

    def eos_ids(self, entry: Entry) -> frozenset[int]:
        """Every token that ends a completion: the tokenizer's EOS and the model's generation config's."""
        ids: set[int] = set()
        tok = self.tokenizer_for(entry)
        if tok.eos_token_id is not None:
            ids.add(int(tok.eos_token_id))
        gen = getattr(self.model_for(entry.base_key), "generation_config", None)
        eos = getattr(gen, "eos_token_id", None)
        ids.update(int(i) for i in (eos if isinstance(eos, list | tuple) else [eos]) if i is not None)
        return frozenset(ids)

    def renderer(self, entry: Entry) -> ChatRenderer:
        """The model's one renderer (`primenb.engine.chat`), built once per tokenizer."""
        tok = self.tokenizer_for(entry)
        found = self._renderers.get(id(tok))
        if found is None or found.tokenizer is not tok:
            found = self._renderers[id(tok)] = ChatRenderer(tok)
        return found

    def tool_call_parser(self, entry: Entry) -> str | None:
        """The format this model's tool calls are parsed in (None: it takes no tools)."""
        return self.renderer(entry).parser

    def prompt_format(self, entry: Entry) -> str:
        """How one-turn chat messages are shown to this model: ``chat_template`` (the renderer),
        ``text_template`` (the trace's environment format) or ``raw`` (the last user message as is).
        The embedded models train on text, so theirs is the text format (tools use their template),
        unless their checkpoint says they trained on conversations (verifiers episodes)."""
        if entry.chat_trained or trains_on_chat(self.tokenizer_for(entry)):
            return "chat_template"
        return "text_template" if entry.text_template else "raw"

    def vocab_size(self, entry: Entry) -> int:
        return int(self.model_for(entry.base_key).get_input_embeddings().weight.shape[0])

    def context_limit(self, entry: Entry) -> int:
        model = self.model_for(entry.base_key)
        return int(getattr(model.config, "max_position_embeddings", 0) or 2048)

    def prompt_ids(self, entry: Entry, prompt: str | Conversation) -> tuple[list[int], str]:
        """The token ids the model sees, and their text. A conversation with tools or tool turns,
        or to a model that trains on chat, goes through the renderer; a plain one to a model that
        trains on text is its last user message in the trace's prompt format."""
        tok = self.tokenizer_for(entry)
        if isinstance(prompt, Conversation):
            if prompt.has_tool_turns or prompt.template_kwargs or self.prompt_format(entry) == "chat_template":
                renderer = self.renderer(entry)
                if not renderer.has_template:
                    raise ServeError(
                        f"The model {entry.id!r} has no chat template, so it cannot take tools or tool "
                        "turns; send plain messages.",
                        ErrorKind.INVALID,
                        "messages",
                    )
                try:
                    ids = renderer.render(prompt)
                except Exception as exc:  # a template that raises on these messages: the client's to fix
                    raise ServeError(
                        f"The model's chat template could not render these messages "
                        f"({type(exc).__name__}: {str(exc)[:300]}).",
                        ErrorKind.INVALID,
                        "messages",
                    ) from None
                return ids, str(tok.decode(ids, skip_special_tokens=False))
            text = self._one_turn_text(entry, prompt.messages)
        else:
            text = prompt
        ids = tok(text, add_special_tokens=True)["input_ids"]
        return [int(i) for i in ids], text

    def _one_turn_text(self, entry: Entry, messages: list[dict[str, Any]]) -> str:
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        text = users[-1] if users else "\n".join(_text(m.get("content")) for m in messages)
        if entry.text_template:
            # bounded before it is built: a template repeating {prompt} multiplies the prompt
            size = len(entry.text_template) + entry.text_template.count("{prompt}") * len(text)
            limit = 32 * self.context_limit(entry)
            if size > limit:
                raise ServeError(
                    f"This model's prompt format makes the prompt more than {limit} characters; shorten it.",
                    ErrorKind.INVALID,
                    "messages",
                    "context_length_exceeded",
                )
            text = entry.text_template.replace("{prompt}", text).replace("{system_prompt}", "")
        return text


def _note_base(meta: dict[str, Any]) -> dict[str, Any] | None:
    """The weights an adapter's note names (``{"name", "seed", "path"}``), or None when it names
    none; a note of another shape is the checkpoint's fault, an INVALID error."""
    base = meta.get("base")
    if base is None or base == {}:  # a full model's note may record no base
        return None
    name, seed, path = (base.get(k) for k in ("name", "seed", "path")) if isinstance(base, dict) else (0, 0, 0)
    if not (
        isinstance(base, dict)
        and isinstance(name, str)
        and 0 < len(name) <= 4096
        and (seed is None or (isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 2**32))
        and (path is None or (isinstance(path, str) and 0 < len(path) <= 4096 and "\x00" not in path))
    ):
        raise ServeError(
            f"the checkpoint's note ({CheckpointDir.META}) records its base weights in an unreadable shape; "
            'it needs "base" = {"name": str, "seed": int in [0, 2**32), "path": str or null}.',
            ErrorKind.INVALID,
            "checkpoint",
        )
    return {"name": name, "seed": seed or 0, "path": path}


# a quantified group or a backreference: what makes a regex backtrack for minutes on a module name
_BACKTRACKS = re.compile(r"\)[*+?{]|\\[1-9]")


def _check_adapter_config(ckpt: Path) -> None:
    """PEFT matches a string ``target_modules`` as a regex against every module name, on the
    scheduler's thread: one that can backtrack without end is refused before PEFT sees it."""
    config = reader.read_json_object(CheckpointDir(ckpt).adapter_config_path)
    for key in ("target_modules", "exclude_modules"):
        value = config.get(key)
        if isinstance(value, str) and (len(value) > 1000 or _BACKTRACKS.search(value)):
            raise ServeError(
                f"the adapter's {key} is a regular expression this server does not run (a quantified "
                "group or a backreference can take minutes per module name); list the module names.",
                ErrorKind.INVALID,
                "checkpoint",
            )


def _text(content: Any) -> str:
    return content if isinstance(content, str) else ""


__all__ = ["Entry", "ModelPool", "ServeError"]
