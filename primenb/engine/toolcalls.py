"""Tool calls in a completion's text: found, parsed and streamed as OpenAI's ``tool_calls``.

A model calls a tool in the format its chat template taught it (vLLM's ``--tool-call-parser``):
- ``hermes``: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, one block per call
  (Qwen 2.5 / 3, Hermes, the embedded ``primenb/tiny-byte`` template);
- ``llama3_json``: the whole reply is ``{"name": ..., "parameters": {...}}`` (Llama 3.x), optionally
  after ``<|python_tag|>``; several calls are separated by ``;``.

A completion that does not parse is returned as text, never an error. No torch here: the HTTP
layer streams with `ToolCallStream` and the scheduler never sees tools.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TAG = "<|python_tag|>"
PARSERS = ("hermes", "llama3_json")
MAX_CALLS = 64  # tool calls taken from one completion; the rest stays text


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI sends it
    id: str = field(default_factory=lambda: "call_" + secrets.token_hex(12))

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class Parsed:
    content: str | None  # text outside the calls (None when there is none and calls were made)
    calls: tuple[ToolCall, ...] = ()


def _call(obj: Any, args_key: str) -> ToolCall | None:
    """A call from a decoded JSON object, or None when it is not one (no name, arguments not an object)."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    args = obj.get(args_key, obj.get("arguments", {}))
    if not isinstance(name, str) or not name or len(name) > 256:
        return None
    if isinstance(args, str):  # some models write the arguments as a JSON string
        try:
            args = json.loads(args)
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(name, json.dumps(args, ensure_ascii=False))


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def parse_hermes(text: str) -> Parsed:
    start = text.find(HERMES_OPEN)
    if start < 0:
        return Parsed(text)
    calls: list[ToolCall] = []
    rest = text[start:]
    while rest.startswith(HERMES_OPEN) and len(calls) < MAX_CALLS:
        end = rest.find(HERMES_CLOSE)
        if end < 0:
            return Parsed(text)  # an unclosed block: the whole reply stays text
        call = _call(_loads(rest[len(HERMES_OPEN) : end].strip()), "arguments")
        if call is None:
            return Parsed(text)
        calls.append(call)
        rest = rest[end + len(HERMES_CLOSE) :].lstrip()
    if rest:  # text after the calls: not a tool-call reply as the template writes one
        return Parsed(text)
    content = text[:start]
    return Parsed(content if content.strip() else None, tuple(calls))


def parse_llama3_json(text: str) -> Parsed:
    body = text.strip()
    if body.startswith(PYTHON_TAG):
        body = body[len(PYTHON_TAG) :].strip()
    if not body.startswith("{"):
        return Parsed(text)
    calls: list[ToolCall] = []
    for part in body.split(";") if ";" in body else [body]:
        call = _call(_loads(part.strip()), "parameters")
        if call is None:
            return Parsed(text)
        calls.append(call)
    return Parsed(None, tuple(calls[:MAX_CALLS]))


def parse(text: str, parser: str) -> Parsed:
    if parser == "hermes":
        return parse_hermes(text)
    if parser == "llama3_json":
        return parse_llama3_json(text)
    raise ValueError(f"unknown tool-call parser {parser!r}; known: {', '.join(PARSERS)}")


def _start_marker(parser: str) -> tuple[str, ...]:
    """Texts a tool-call reply starts with: content before them streams, from them on it is held."""
    return (HERMES_OPEN,) if parser == "hermes" else ("{", PYTHON_TAG)


class ToolCallStream:
    """One choice's streamed text with tools on: content streams until a call may begin, then the
    rest is held and parsed when the choice ends (as vLLM's parsers do, a call's arguments are sent
    whole in one fragment). ``push`` returns the content now safe to send; ``close`` the parse of
    the held text, or the held text as content when it is not a call."""

    def __init__(self, parser: str) -> None:
        self.parser = parser
        self.markers = _start_marker(parser)
        self.sent = ""  # content already returned
        self.held = ""  # text from a possible call's start on
        self.holding = False
        self._pending = ""  # a tail that may be the beginning of a marker

    def push(self, text: str) -> str:
        if self.holding:
            self.held += text
            return ""
        buf = self._pending + text
        if self.parser == "llama3_json" and not (self.sent + buf).strip():
            self._pending = buf  # leading whitespace: nothing decided yet
            return ""
        cut = self._marker_at(buf)
        if cut is not None:
            self.holding, self.held, self._pending = True, buf[cut:], ""
            out = buf[:cut]
            if not (self.sent + out).strip():  # only whitespace before a call: no content at all
                self.held, out = out + self.held, ""
        else:
            keep = max(self._partial_tail(buf), len(buf) - len(buf.rstrip()))  # a call may follow
            out, self._pending = buf[: len(buf) - keep], buf[len(buf) - keep :]
        self.sent += out
        return out

    def _marker_at(self, buf: str) -> int | None:
        if self.parser == "llama3_json":  # a JSON reply is one from its first character
            lead = len(self.sent + buf) - len((self.sent + buf).lstrip())
            start = lead - len(self.sent)
            if start >= 0 and any(buf[start:].startswith(m) for m in self.markers):
                return start
            return None
        hits = [i for i in (buf.find(m) for m in self.markers) if i >= 0]
        return min(hits) if hits else None

    def _partial_tail(self, buf: str) -> int:
        if self.parser == "llama3_json" and self.sent.strip():
            return 0  # text already started: a JSON reply can no longer begin
        longest = 0
        for marker in self.markers:
            for k in range(1, len(marker)):
                if buf.endswith(marker[:k]):
                    longest = max(longest, k)
        return longest

    def close(self) -> tuple[str, tuple[ToolCall, ...]]:
        """``(content still to send, calls)`` at the end of the choice."""
        rest = self._pending
        self._pending = ""
        if not self.holding:
            self.sent += rest
            return rest, ()
        parsed = parse(self.sent + self.held, self.parser)
        if not parsed.calls:
            return rest + self.held, ()
        said = parsed.content or ""
        extra = said[len(self.sent) :] if said.startswith(self.sent) else ""
        return extra, parsed.calls


__all__ = ["PARSERS", "Parsed", "ToolCall", "ToolCallStream", "parse"]
