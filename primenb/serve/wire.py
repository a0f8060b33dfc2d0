"""OpenAI's response shapes: chat and completion objects, their stream chunks, logprobs in each
endpoint's own format, usage and errors. Pure functions of the engine's events; no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from primenb.engine.serve_requests import Delta, Event, Finished, TokenLogprob

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
    return _event({**base, "object": "chat.completion.chunk", "choices": [choice]}, with_usage)


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
    return _event({**base, "object": "text_completion", "choices": [choice]}, with_usage)


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


class Choices:
    """A non-streamed response's choices, built from the events of its rows."""

    def __init__(self, count: int, *, chat: bool) -> None:
        self.chat = chat
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
                message = {"role": "assistant", "content": text}
                out.append({"index": i, "message": message, "finish_reason": c.finish, "logprobs": logprobs})
            else:
                logprobs = completion_logprobs(c.logprobs) if c.logprobs is not None else None
                out.append({"index": i, "text": text, "finish_reason": c.finish, "logprobs": logprobs})
        return out


__all__ = [
    "Choices",
    "TokenChoice",
    "chat_chunk",
    "chat_logprobs",
    "completion_chunk",
    "completion_logprobs",
    "error_body",
    "token_logprobs",
    "usage",
]
