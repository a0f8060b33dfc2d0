"""Chat rendered as upstream renders it: for every model family the installed `renderers` package
knows, a request's messages and tools (through the server's own request parsing) become the token
ids that family's renderer gives prime-rl and verifiers; a model with only a chat template renders
as renderers' template fallback does. Families are built offline from a byte-level tokenizer with
the special tokens each renderer asks for (the real vocabularies are not on this machine)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from renderers import DefaultRenderer, create_renderer
from renderers.base import MODEL_RENDERER_MAP
from renderers.configs import DefaultRendererConfig, config_from_name
from tokenizers import AddedToken

from primenb.engine.chat import ChatRenderer
from primenb.engine.models import build_byte_tokenizer
from primenb.serve.protocol import ChatRequest

# gpt-oss renders through openai-harmony, which downloads its vocabulary: not checkable offline
NOT_OFFLINE = {"gpt-oss"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
BODY: dict[str, Any] = {
    "model": "m",
    "tools": TOOLS,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Weather in "}, {"type": "text", "text": "Paris?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ],
}
# what the client meant, as renderers takes it (content parts joined: renderers' text form)
UPSTREAM_MESSAGES = [
    BODY["messages"][0],
    {"role": "user", "content": "Weather in Paris?"},
    BODY["messages"][2],
    BODY["messages"][3],
]


def _family_tokenizer(model_name: str, tokens: list[str]) -> Any:
    tok = build_byte_tokenizer()
    tok.chat_template = None
    tok.add_special_tokens(
        {"additional_special_tokens": [AddedToken(t, special=True, normalized=False) for t in tokens]}
    )
    tok.name_or_path = model_name
    return tok


def _upstream(family: str, model_name: str) -> tuple[Any, list[int]]:
    """The family's tokenizer and renderer ids, adding each special token the renderer asks for."""
    tokens: list[str] = []
    for _ in range(60):
        tok = _family_tokenizer(model_name, tokens)
        try:
            renderer = create_renderer(tok, config_from_name(family))
            ids = renderer.render(UPSTREAM_MESSAGES, tools=TOOLS, add_generation_prompt=True).token_ids
            return tok, list(ids)
        except (AssertionError, ValueError, KeyError) as exc:
            asked = [t for t in re.findall(r"'([^']{1,60})'", str(exc)) if t not in tokens]
            if not asked:
                raise
            tokens.append(asked[0])
    raise AssertionError(f"{family}: too many special tokens asked for")


FAMILIES = sorted({f: m for m, f in MODEL_RENDERER_MAP.items()}.items())


@pytest.mark.parametrize(("family", "model_name"), [f for f in FAMILIES if f[0] not in NOT_OFFLINE])
def test_each_family_renders_as_its_upstream_renderer(family: str, model_name: str) -> None:
    tok, want = _upstream(family, model_name)
    ours = ChatRenderer(tok)
    assert ours.name == f"renderers:{family}"
    assert ours.render(ChatRequest.model_validate(BODY).conversation()) == want


def test_the_checked_families_cover_the_tool_parsers() -> None:
    checked = {f for f, _ in FAMILIES} - NOT_OFFLINE
    assert {"qwen3", "llama-3"} <= checked and len(checked) >= 20


def test_a_template_renders_as_renderers_template_fallback() -> None:
    tok = build_byte_tokenizer()  # the embedded models' template
    fallback = DefaultRenderer(tok, DefaultRendererConfig())
    want = fallback.render(UPSTREAM_MESSAGES, tools=TOOLS, add_generation_prompt=True).token_ids
    ours = ChatRenderer(tok)
    assert ours.name == "tiny-byte-chat" and ours.parser == "hermes"
    assert ours.render(ChatRequest.model_validate(BODY).conversation()) == list(want)
    text = ours.render_text(ChatRequest.model_validate(BODY).conversation())
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><eos>' in text
    assert text.endswith("<bos>tool\n<tool_response>\nsunny\n</tool_response><eos>\n<bos>assistant\n")


def test_template_switches_reach_the_template_and_reserved_names_do_not() -> None:
    from pydantic import ValidationError

    tok = build_byte_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}>{% endif %}{{ tone }}"
    )
    ours = ChatRenderer(tok)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert ours.render_text(ChatRequest.model_validate(body).conversation()) == "hi>"
    off = ChatRequest.model_validate({**body, "add_generation_prompt": False, "chat_template_kwargs": {"tone": "!"}})
    assert ours.render_text(off.conversation()) == "hi!"
    for key in ("chat_template", "tools", "tokenize", "messages", "not an identifier"):
        with pytest.raises(ValidationError, match="chat_template_kwargs may not set"):
            ChatRequest.model_validate({**body, "chat_template_kwargs": {key: "x"}})
