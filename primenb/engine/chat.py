"""Chat as a model sees it: messages (and tools) to token ids, one way for training, evaluation and
serving, so a served model is shown what it was trained on.

Which renderer a model gets, in the order prime-rl and vLLM decide it:
1. the `renderers` package's renderer for the model's family, when it knows the model's name
   (Qwen3, Llama 3, gpt-oss, GLM, ...: what prime-rl and verifiers render with);
2. otherwise the tokenizer's own chat template (``apply_chat_template``, what vLLM renders with);
3. a tokenizer with no template renders text only: a conversation is its last user message in
   the run's prompt format (`primenb.engine.serving`).

The embedded ``primenb/tiny-byte*`` models carry `TINY_CHAT_TEMPLATE`, a ChatML-like template over
their ``<bos>`` / ``<eos>`` tokens with Hermes tool calls (``<tool_call>{json}</tool_call>``), so
tools and conversations run offline. Their built-in environments are one-turn text tasks, and that
text format is what they train on (`trains_on_chat` says no): the template serves conversations
that carry tools or tool turns.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# The embedded models' template. ``<bos>`` opens a turn and ``<eos>`` closes it (so a reply ends
# on the model's own end-of-text token); tool results come back in ``tool`` turns.
TINY_CHAT_TEMPLATE = (
    "{%- set sys = messages[0].content if messages and messages[0].role == 'system' else none -%}"
    "{%- if tools or sys is not none -%}"
    "{{- '<bos>system\\n' -}}"
    "{%- if sys is not none -%}{{- sys -}}{%- if tools -%}{{- '\\n\\n' -}}{%- endif -%}{%- endif -%}"
    "{%- if tools -%}"
    "{{- '# Tools\\nYou may call functions. Their signatures are in <tools></tools>:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' -}}{{- (tool.function if tool.function is defined else tool) | tojson -}}"
    "{%- endfor -%}"
    '{{- \'\\n</tools>\\nTo call one, reply with <tool_call>\\n{"name": <function name>, "arguments": '
    "<arguments as a JSON object>}\\n</tool_call>' -}}"
    "{%- endif -%}"
    "{{- '<eos>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' and loop.first -%}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- '<bos>assistant\\n' -}}{%- generation -%}{{- m.content or '' -}}"
    "{%- for tc in m.tool_calls or [] -%}"
    "{%- set f = tc.function if tc.function is defined else tc -%}"
    "{%- if m.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": ' -}}{{- f.name | tojson -}}{{- ', \"arguments\": ' -}}"
    "{{- f.arguments if f.arguments is string else f.arguments | tojson -}}{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}{{- '<eos>' -}}{%- endgeneration -%}{{- '\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{{- '<bos>tool\\n<tool_response>\\n' -}}{{- m.content -}}{{- '\\n</tool_response><eos>\\n' -}}"
    "{%- else -%}"
    "{{- '<bos>' + m.role + '\\n' -}}{{- m.content -}}{{- '<eos>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<bos>assistant\\n' -}}{%- endif -%}"
)

# Tool-call formats by what a template writes (vLLM's --tool-call-parser names).
_PARSER_MARKS = (("<tool_call>", "hermes"), ("<|python_tag|>", "llama3_json"))
# ... and by the `renderers` family (only those whose calls are in a format parsed here)
_UPSTREAM_PARSERS = {"qwen3": "hermes", "llama-3": "llama3_json"}


def trains_on_chat(tokenizer: Any) -> bool:
    """Whether one-turn environment prompts are shown to this model as chat messages. The embedded
    models train on their environments' text format (their template is for conversations)."""
    template = getattr(tokenizer, "chat_template", None)
    return template is not None and template != TINY_CHAT_TEMPLATE


def tool_parser(tokenizer: Any) -> str | None:
    """The tool-call format this model's template teaches, or None when it takes no tools."""
    template = str(getattr(tokenizer, "chat_template", None) or "")
    if "tools" not in template:
        return None
    for mark, parser in _PARSER_MARKS:
        if mark in template:
            return parser
    return None


def upstream_renderer_name(tokenizer: Any) -> str | None:
    """The `renderers` package's renderer for this model's name, when it has one (exact name, as
    the package matches it; no hub probe)."""
    try:
        from renderers.base import MODEL_RENDERER_MAP
    except ImportError:  # verifiers (and renderers with it) is optional
        return None
    name = str(getattr(tokenizer, "name_or_path", "") or "")
    found = MODEL_RENDERER_MAP.get(name)
    return str(found) if found else None


@dataclass
class Conversation:
    """What a chat request asks a model to continue: messages (OpenAI's dicts), the tools it may
    call, and the template switches (``chat_template_kwargs``, ``add_generation_prompt``)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    template_kwargs: Mapping[str, Any] | None = None

    @property
    def size(self) -> int:
        """Characters of text in it (a bound on its tokens, checked before rendering)."""
        texts = [json.dumps(m, ensure_ascii=False) for m in self.messages]
        return sum(map(len, texts)) + len(json.dumps(self.tools or [], ensure_ascii=False))

    @property
    def has_tool_turns(self) -> bool:
        return bool(self.tools) or any(m.get("role") == "tool" or m.get("tool_calls") for m in self.messages)


class ChatRenderer:
    """One model's renderer (see the module docstring). ``render`` gives prompt token ids."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.upstream = upstream_renderer_name(tokenizer)
        self.parser = _UPSTREAM_PARSERS.get(self.upstream or "") or tool_parser(tokenizer)
        self._renderer: Any = None

    @property
    def name(self) -> str:
        if self.upstream:
            return f"renderers:{self.upstream}"
        if getattr(self.tokenizer, "chat_template", None) == TINY_CHAT_TEMPLATE:
            return "tiny-byte-chat"
        return "chat_template" if self.has_template else "text"

    @property
    def has_template(self) -> bool:
        return self.upstream is not None or getattr(self.tokenizer, "chat_template", None) is not None

    def _upstream(self) -> Any:
        if self._renderer is None:
            from renderers import create_renderer
            from renderers.configs import config_from_name

            assert self.upstream is not None
            self._renderer = create_renderer(self.tokenizer, config_from_name(self.upstream))
        return self._renderer

    def render(self, conv: Conversation) -> list[int]:
        if self.upstream and not conv.template_kwargs:  # messages as the clients sent them, as upstream
            rendered = self._upstream().render(
                conv.messages, tools=conv.tools or None, add_generation_prompt=conv.add_generation_prompt
            )
            return [int(i) for i in rendered.token_ids]
        messages = [_decoded_arguments(m) for m in conv.messages]
        kwargs = dict(conv.template_kwargs or {})
        ids = self.tokenizer.apply_chat_template(
            messages,
            tools=conv.tools or None,
            add_generation_prompt=conv.add_generation_prompt,
            tokenize=True,
            return_dict=False,
            **kwargs,
        )
        return [int(i) for i in ids]

    def render_text(self, conv: Conversation) -> str:
        return str(self.tokenizer.decode(self.render(conv), skip_special_tokens=False))


def _decoded_arguments(message: dict[str, Any]) -> dict[str, Any]:
    """A message with its tool calls' JSON ``arguments`` as objects: templates (Qwen, Llama, the
    embedded one) write objects, and OpenAI sends strings."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    out = []
    for call in calls:
        fn = dict(call.get("function") or {})
        if isinstance(fn.get("arguments"), str):
            with contextlib.suppress(ValueError):  # else a template writes the string as it came
                fn["arguments"] = json.loads(fn["arguments"])
        out.append({**call, "function": fn})
    return {**message, "tool_calls": out}


def chat_text(tokenizer: Any, messages: list[dict[str, Any]]) -> str:
    """A one-turn chat prompt as text with its generation prompt (training and evaluation prompts
    of models that train on chat)."""
    return ChatRenderer(tokenizer).render_text(Conversation(messages))


__all__ = [
    "TINY_CHAT_TEMPLATE",
    "ChatRenderer",
    "Conversation",
    "chat_text",
    "tool_parser",
    "trains_on_chat",
    "upstream_renderer_name",
]
