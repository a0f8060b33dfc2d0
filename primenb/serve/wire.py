"""OpenAI's response shapes: chat and completion objects, their stream chunks, logprobs in each
endpoint's own format, usage and errors. Pure functions of the engine's events; no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from primenb.engine.serve_requests import Delta, Event, Finished, TokenLogprob
from primenb.engine.toolcalls import ToolCall, ToolCallStream, parse
from primenb.protocol import openai_api as api

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(message: str, status: int, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _bytes(text: str) -> list[int]:
    return list(text.encode("utf-8", "replace"))


def chat_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": e.token,
                "logprob": e.logprob,
                "bytes": _bytes(e.token),
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": _bytes(t)} for t, lp in e.top],
            }
            for e in entries
        ],
        "refusal": None,
    }


def completion_logprobs(entries: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """The legacy format: parallel lists; ``text_offset`` counts from the start of the choice's text."""
    offsets = []
    for e in entries:
        offsets.append(offset)
        offset += len(e.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [dict(e.top) for e in entries],
        "text_offset": offsets,
    }


def chat_chunk(
    base: dict[str, Any],
    index: int,
    *,
    role: bool = False,
    text: str = "",
    logprobs: list[TokenLogprob] | None = None,
    finish: str | None = None,
    with_usage: bool = False,
) -> str:
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else ({"content": text} if not finish else {})
    choice = {
        "index": index,
        "delta": delta,
        "logprobs": chat_logprobs(logprobs) if logprobs else None,
        "finish_reason": finish,
    }
    return _event({**base, "object": api.CHAT_COMPLETION_CHUNK, "choices": [choice]}, with_usage)


def tool_calls_chunk(
    base: dict[str, Any], index: int, calls: tuple[ToolCall, ...], *, first: int = 0, with_usage: bool = False
) -> str:
    """The calls of one choice, each whole (id, name and all its arguments) under its own ``index``:
    how vLLM's parsers send a call, and what `openai`'s stream helpers assemble."""
    fragments = [{"index": first + i, **call.as_dict()} for i, call in enumerate(calls)]
    choice = {"index": index, "delta": {"tool_calls": fragments}, "logprobs": None, "finish_reason": None}
    return _event({**base, "object": api.CHAT_COMPLETION_CHUNK, "choices": [choice]}, with_usage)


def completion_chunk(
    base: dict[str, Any],
    index: int,
    *,
    text: str = "",
    logprobs: list[TokenLogprob] | None = None,
    finish: str | None = None,
    with_usage: bool = False,
    offset: int = 0,
) -> str:
    choice = {
        "index": index,
        "text": text,
        "logprobs": completion_logprobs(logprobs, offset) if logprobs else None,
        "finish_reason": finish,
    }
    return _event({**base, "object": api.TEXT_COMPLETION, "choices": [choice]}, with_usage)


def _event(doc: dict[str, Any], with_usage: bool) -> str:
    if with_usage:
        doc["usage"] = None  # OpenAI: null on every chunk but the last, which carries the totals
    return f"data: {json.dumps(doc, ensure_ascii=False)}\n\n"


LOGPROB_FLOOR = -9999.0  # vLLM's floor for a logprob (-inf is not JSON)


def _floored(logprob: float | None) -> float:
    return LOGPROB_FLOOR if logprob is None or logprob != logprob else max(logprob, LOGPROB_FLOOR)


def token_logprobs(entries: list[TokenLogprob]) -> dict[str, Any]:
    """``/inference/v1/generate``'s logprobs: chat's ``content`` list, tokens named ``token_id:N``."""
    return {
        "content": [
            {
                "token": e.token,
                "logprob": _floored(e.logprob),
                "top_logprobs": [{"token": t, "logprob": _floored(lp)} for t, lp in e.top],
            }
            for e in entries
        ]
    }


@dataclass
class TokenChoice:
    """One choice of ``/inference/v1/generate``: every token the row sampled, its stop token last."""

    token_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    finish: str | None = None

    def add(self, event: Event) -> None:
        if isinstance(event, Delta):
            self.token_ids += event.token_ids
            self.logprobs += event.logprobs or []
        elif isinstance(event, Finished):
            if event.stop_token is not None:
                self.token_ids.append(event.stop_token)
                self.logprobs += [event.stop_logprob] if event.stop_logprob is not None else []
            self.finish = event.reason

    def final(self, index: int, *, logprobs: bool) -> dict[str, Any]:
        return {
            "index": index,
            "token_ids": self.token_ids,
            "logprobs": token_logprobs(self.logprobs) if logprobs else None,
            "finish_reason": self.finish or "stop",
        }


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] | None = None
    finish: str | None = None


@dataclass(frozen=True)
class ToolMode:
    """A chat request with tools on: the format its model's calls are parsed in, and whether a
    reply may make more than one call (``parallel_tool_calls``; vLLM keeps the first when not)."""

    parser: str
    parallel: bool = True

    def calls(self, text: str) -> tuple[str | None, tuple[ToolCall, ...]]:
        parsed = parse(text, self.parser)
        calls = parsed.calls if self.parallel else parsed.calls[:1]
        return parsed.content, calls


def finish_with_calls(reason: str | None, calls: tuple[ToolCall, ...]) -> str | None:
    return "tool_calls" if calls and reason == "stop" else reason


class StreamChunks:
    """A streamed response's chunks, choice by choice: text as it comes (completions keep their
    ``text_offset``; with tools, a choice's text until a call may begin) and each choice's end
    (with tools, its calls whole, then ``finish_reason`` ``tool_calls``)."""

    def __init__(self, base: dict[str, Any], *, chat: bool, with_usage: bool, tools: ToolMode | None) -> None:
        self.base, self.chat, self.with_usage, self.tools = base, chat, with_usage, tools
        self.offsets: dict[int, int] = {}  # completions: characters of each choice sent so far
        self.calls: dict[int, ToolCallStream] = {}

    def _calls(self, index: int) -> ToolCallStream:
        assert self.tools is not None
        return self.calls.setdefault(index, ToolCallStream(self.tools.parser))

    def delta(self, index: int, delta: Delta) -> str | None:
        if not self.chat:
            at = self.offsets.get(index, 0)
            self.offsets[index] = at + sum(len(e.token) for e in delta.logprobs or [])
            return completion_chunk(
                self.base, index, text=delta.text, logprobs=delta.logprobs, with_usage=self.with_usage, offset=at
            )
        text = delta.text if self.tools is None else self._calls(index).push(delta.text)
        if not text and not delta.logprobs and self.tools is not None:
            return None  # held: it may be part of a call
        return chat_chunk(self.base, index, text=text, logprobs=delta.logprobs, with_usage=self.with_usage)

    def end(self, index: int, reason: str) -> list[str]:
        if not self.chat:
            return [completion_chunk(self.base, index, finish=reason, with_usage=self.with_usage)]
        out = []
        if self.tools is not None:
            rest, made = self._calls(index).close()
            made = made if self.tools.parallel else made[:1]
            if rest:
                out.append(chat_chunk(self.base, index, text=rest, with_usage=self.with_usage))
            if made:
                out.append(tool_calls_chunk(self.base, index, made, with_usage=self.with_usage))
            reason = finish_with_calls(reason, made) or reason
        return [*out, chat_chunk(self.base, index, finish=reason, with_usage=self.with_usage)]


def _joined(first: Delta, then: Delta) -> Delta:
    """Two deltas of one row as one: text, tokens and logprobs in order."""
    both = first.logprobs is None and then.logprobs is None
    logprobs = None if both else [*(first.logprobs or []), *(then.logprobs or [])]
    return Delta(then.index, first.text + then.text, logprobs, [*first.token_ids, *then.token_ids])


class Pacing:
    """Which deltas of a streamed response go out now. The events that waited together on the
    response's queue (``(request, event)`` in order) come in one batch; each row's deltas in it
    are merged into one, so a stream that fell behind the decode steps catches up in one chunk
    (vLLM merges the outputs a request's reader has not taken yet the same way). With
    ``interval`` > 1 (vLLM's ``stream_interval``) a row's text is also held until ``interval``
    tokens have come, except its first text (sent at once: the time to first token does not move)
    and what is left when the row ends (sent before its end). Other events keep their order."""

    def __init__(self, interval: int = 1) -> None:
        self.interval = max(1, interval)
        self.held: dict[tuple[int, int], Delta] = {}
        self.started: set[tuple[int, int]] = set()  # rows whose first text went out

    def release(self, batch: list[tuple[int, Event]]) -> list[tuple[int, Event]]:
        out: list[tuple[int, Event]] = []
        for i, event in batch:
            if isinstance(event, Delta):
                key = (i, event.index)
                held = self.held.get(key)
                self.held[key] = event if held is None else _joined(held, event)
                continue
            if isinstance(event, Finished):
                rest = self.held.pop((i, event.index), None)
                if rest is not None:
                    out.append((i, rest))
            out.append((i, event))
        for key, delta in list(self.held.items()):
            if key not in self.started or len(delta.token_ids) >= self.interval:
                del self.held[key]
                out.append((key[0], delta))
                if delta.text or delta.logprobs:
                    self.started.add(key)
        return out


class Choices:
    """A non-streamed response's choices, built from the events of its rows."""

    def __init__(self, count: int, *, chat: bool, tools: ToolMode | None = None) -> None:
        self.chat = chat
        self.tools = tools
        self.items = [_Choice() for _ in range(count)]
        self.completion_tokens = 0

    def add(self, offset: int, event: Event) -> None:
        if isinstance(event, Delta):
            choice = self.items[offset + event.index]
            choice.text.append(event.text)
            if event.logprobs is not None:
                choice.logprobs = (choice.logprobs or []) + event.logprobs
        elif isinstance(event, Finished):
            self.items[offset + event.index].finish = event.reason
            self.completion_tokens += event.completion_tokens

    def final(self) -> list[dict[str, Any]]:
        out = []
        for i, c in enumerate(self.items):
            text = "".join(c.text)
            if self.chat:
                logprobs = chat_logprobs(c.logprobs) if c.logprobs is not None else None
                message: dict[str, Any] = {"role": "assistant", "content": text}
                finish = c.finish
                if self.tools is not None:
                    content, calls = self.tools.calls(text)
                    if calls:
                        message = {"role": "assistant", "content": content, "tool_calls": [x.as_dict() for x in calls]}
                        finish = finish_with_calls(finish, calls)
                out.append({"index": i, "message": message, "finish_reason": finish, "logprobs": logprobs})
            else:
                logprobs = completion_logprobs(c.logprobs) if c.logprobs is not None else None
                out.append({"index": i, "text": text, "finish_reason": c.finish, "logprobs": logprobs})
        return out


__all__ = [
    "Choices",
    "Pacing",
    "StreamChunks",
    "TokenChoice",
    "ToolMode",
    "chat_chunk",
    "chat_logprobs",
    "completion_chunk",
    "completion_logprobs",
    "error_body",
    "finish_with_calls",
    "token_logprobs",
    "tool_calls_chunk",
    "usage",
]
