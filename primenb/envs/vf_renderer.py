"""A `renderers` renderer for chat templates that write Hermes tool calls as text (the embedded
``primenb/tiny-byte*`` models), so verifiers' training client can run tool-using episodes on them.

verifiers' `TrainClient` renders each turn with the ``renderers`` package and parses the sampled
ids back into a message with the renderer's own tool parser. A model that ``renderers`` does not
know gets its `DefaultRenderer` (the tokenizer's chat template), which parses no tool calls and
refuses requests with tools; its Hermes parser (``qwen3``) looks for ``<tool_call>`` as one
special token, which a byte-level vocabulary does not have. `HermesRenderer` is that
`DefaultRenderer` (the same rendering, token for token) with a Hermes parser that finds
``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` by the ids the tokenizer gives those
markers, with the same rules as ``renderers``' own Hermes parser (a call per block, the text
before the first block is the content, one record per attempt with its parse status).

verifiers and prime-rl load it through ``renderers``' documented extension point::

    [orchestrator.renderer]        # or verifiers' [client.renderer]
    name = "custom"
    import_path = "primenb.envs.vf_renderer.HermesRenderer"

It only holds for tokenizers that encode the markers the same way wherever they occur (a
byte-level vocabulary); a BPE vocabulary with ``<tool_call>`` as a special token has a family
renderer of its own in ``renderers``.
"""

from __future__ import annotations

import json
from typing import Any

from renderers import DefaultRendererConfig
from renderers.base import ParsedToolCall, ToolCallParseStatus
from renderers.default import DefaultRenderer

OPEN, CLOSE = "<tool_call>", "</tool_call>"
IMPORT_PATH = "primenb.envs.vf_renderer.HermesRenderer"


def _find(ids: list[int], seq: list[int], start: int = 0) -> int:
    """The index of the first occurrence of ``seq`` in ``ids`` at or after ``start``; -1 if none."""
    n = len(seq)
    if not n:
        return -1
    first = seq[0]
    for i in range(start, len(ids) - n + 1):
        if ids[i] == first and ids[i : i + n] == seq:
            return i
    return -1


class HermesTokenParser:
    """Hermes tool calls located by the token ids of their markers (a ``renderers`` tool parser)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self._open = list(tokenizer.encode(OPEN, add_special_tokens=False))
        self._close = list(tokenizer.encode(CLOSE, add_special_tokens=False))

    def extract(self, ids: list[int]) -> tuple[list[int], list[ParsedToolCall]]:
        start = _find(ids, self._open)
        if start == -1:
            return ids, []
        calls: list[ParsedToolCall] = []
        i = start
        while i != -1 and i < len(ids):
            body = i + len(self._open)
            end = _find(ids, self._close, body)
            text = self._tokenizer.decode(ids[body : len(ids) if end == -1 else end]).strip()
            if end == -1:
                calls.append(
                    ParsedToolCall(raw=text, token_span=(i, len(ids)), status=ToolCallParseStatus.UNCLOSED_BLOCK)
                )
                break
            calls.append(_parse(text, (i, end + len(self._close))))
            i = _find(ids, self._open, end + len(self._close))
        return ids[:start], calls


def _parse(text: str, span: tuple[int, int]) -> ParsedToolCall:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return ParsedToolCall(raw=text, token_span=span, status=ToolCallParseStatus.INVALID_JSON)
    name = parsed.get("name", "") if isinstance(parsed, dict) else ""
    arguments = parsed.get("arguments", {}) if isinstance(parsed, dict) else {}
    status = ToolCallParseStatus.OK if name and isinstance(name, str) else ToolCallParseStatus.MISSING_NAME
    return ParsedToolCall(
        raw=text,
        name=name if isinstance(name, str) and name else None,
        arguments=arguments,
        token_span=span,
        status=status,
    )


class HermesRenderer(DefaultRenderer):
    """`DefaultRenderer` (the tokenizer's chat template) with Hermes tool calls parsed from the
    ids of their text markers. Takes `DefaultRendererConfig` (its ``tool_parser`` is not used)."""

    config_class = DefaultRendererConfig

    def __init__(self, tokenizer: Any, config: DefaultRendererConfig | None = None) -> None:
        super().__init__(tokenizer, config)
        self._tool_parser = HermesTokenParser(tokenizer)


def renderer_config() -> Any:
    """The ``renderers`` config that selects `HermesRenderer` (``name = "custom"``)."""
    from renderers import CustomRendererConfig

    return CustomRendererConfig(import_path=IMPORT_PATH)


__all__ = ["IMPORT_PATH", "HermesRenderer", "HermesTokenParser", "renderer_config"]
