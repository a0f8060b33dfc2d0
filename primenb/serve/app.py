"""The OpenAI-compatible HTTP face of the server (Starlette): ``/v1/models``, ``/v1/chat/completions``,
``/v1/completions`` (plain and ``stream``), OpenAI's error shape, Bearer keys, and the admin routes
that add and remove adapters. The models themselves sit behind ``pool`` (`primenb.engine.serving`),
driven from one worker thread. Nothing of a prompt or a completion is ever logged.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from primenb.engine.serve_errors import ServeError

OWNER = "primenb"


ApiError = ServeError  # one error type from the models up to the wire


_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error", 409: "conflict_error"}


def error_response(message: str, status: int, param: str | None = None, code: str | None = None) -> JSONResponse:
    kind = _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status)


class State:
    """What the routes share: the pool, the single generation thread, counters, the key."""

    def __init__(self, pool: Any, *, api_key: str | None, loader: Callable[[dict[str, Any]], Any]) -> None:
        self.pool = pool
        self.api_key = api_key
        self.loader = loader  # spec -> served entry (the admin "add" route)
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="primenb-generate")
        self.started = time.time()
        self.requests = 0
        self.tokens = 0
        self.inflight = 0
        self.stopping = False

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, lambda: fn(*args, **kwargs))


# -- request parsing ------------------------------------------------------------------------------


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        body = json.loads(raw or b"")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"The request body is not valid JSON ({exc}).", 400) from exc
    if not isinstance(body, dict):
        raise ApiError("The request body must be a JSON object.", 400)
    return body


def _number(body: dict[str, Any], key: str, default: float, lo: float, hi: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise ApiError(f"'{key}' must be a number between {lo:g} and {hi:g}; got {value!r}.", 400, key)
    return float(value)


def _integer(body: dict[str, Any], key: str, default: int | None, lo: int, hi: int | None = None) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}"
        raise ApiError(f"'{key}' must be an integer {bound}; got {value!r}.", 400, key)
    return value


def _stop(body: dict[str, Any]) -> list[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) for s in stop):
        raise ApiError("'stop' must be a string or a list of up to 4 strings.", 400, "stop")
    return [s for s in stop if s]


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ApiError("'messages' is required: a non-empty list of {role, content} objects.", 400, "messages")
    out = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError(f"messages[{i}] must be an object with a 'role'.", 400, "messages")
        content = m.get("content")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if content is not None and not isinstance(content, str):
            raise ApiError(f"messages[{i}].content must be a string or a list of text parts.", 400, "messages")
        out.append({"role": m["role"], "content": content or ""})
    return out


# -- routes ---------------------------------------------------------------------------------------


def _model_card(state: State, served_id: str) -> dict[str, Any]:
    entry = state.pool.entries[served_id]
    card = {"id": served_id, "object": "model", "created": int(state.started), "owned_by": OWNER}
    card["primenb"] = {"kind": entry.kind, "trace": entry.trace, "prompt_format": state.pool.prompt_format(entry)}
    return card


async def list_models(request: Request) -> Response:
    state: State = request.app.state.primenb
    return JSONResponse({"object": "list", "data": [_model_card(state, m) for m in state.pool.entries]})


async def get_model(request: Request) -> Response:
    state: State = request.app.state.primenb
    served_id = request.path_params["model_id"]
    state.pool.entry(served_id)  # 404 in OpenAI's shape when unknown
    return JSONResponse(_model_card(state, served_id))


async def chat_completions(request: Request) -> Response:
    return await _complete(request, chat=True)


async def completions(request: Request) -> Response:
    return await _complete(request, chat=False)


async def _complete(request: Request, *, chat: bool) -> Response:
    state: State = request.app.state.primenb
    body = await _json_body(request)
    served_id = body.get("model")
    if not isinstance(served_id, str) or not served_id:
        raise ApiError("'model' is required: one of the ids GET /v1/models lists.", 400, "model")
    entry = state.pool.entry(served_id)
    if chat:
        prompt: Any = _messages(body)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ApiError("'prompt' is required: a string (one prompt per request here).", 400, "prompt")
    temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
    top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
    n = int(_integer(body, "n", 1, 1, 16) or 1)
    seed = _integer(body, "seed", None, -(2**63))
    stop = _stop(body)
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    asked = _integer(body, key, None, 1)
    stream = bool(body.get("stream"))
    text, templated = state.pool.render(entry, prompt)
    prompt_tokens = state.pool.count(entry, text, templated)
    limit = state.pool.context_limit(entry)
    if prompt_tokens >= limit:
        raise ApiError(
            f"This model's maximum context length is {limit} tokens; the prompt has {prompt_tokens}. "
            "Shorten the prompt.",
            400,
            "messages" if chat else "prompt",
            "context_length_exceeded",
        )
    max_tokens = min(asked or limit, limit - prompt_tokens)  # too large: clamped to what fits
    kw = {"max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "n": n, "seed": seed, "stop": stop}
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    created = int(time.time())
    if stream:
        return StreamingResponse(
            _stream(
                state,
                entry,
                text,
                templated,
                kw,
                rid,
                created,
                chat,
                bool((body.get("stream_options") or {}).get("include_usage")),
            ),
            media_type="text/event-stream",
        )
    state.inflight += 1
    try:
        t0 = time.perf_counter()
        results = await state.call(state.pool.generate, entry, text, templated, **kw)
    finally:
        state.inflight -= 1
    completion_tokens = sum(r["completion_tokens"] for r in results)
    state.requests += 1
    state.tokens += completion_tokens
    usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if chat:
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": r["text"]},
                "finish_reason": r["finish_reason"],
                "logprobs": None,
            }
            for i, r in enumerate(results)
        ]
        obj = "chat.completion"
    else:
        choices = [
            {"index": i, "text": r["text"], "finish_reason": r["finish_reason"], "logprobs": None}
            for i, r in enumerate(results)
        ]
        obj = "text_completion"
    headers = {"x-primenb-generate-seconds": f"{time.perf_counter() - t0:.4f}"}
    return JSONResponse(
        {"id": rid, "object": obj, "created": created, "model": entry.id, "choices": choices, "usage": usage},
        headers=headers,
    )


async def _stream(
    state: State,
    entry: Any,
    text: str,
    templated: bool,
    kw: dict[str, Any],
    rid: str,
    created: int,
    chat: bool,
    include_usage: bool,
) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()

    def on_text(i: int, delta: str) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (i, delta))

    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> str:
        doc: dict[str, Any] = {"id": rid, "object": obj, "created": created, "model": entry.id, "choices": choices}
        if usage is not None:
            doc["usage"] = usage
        return f"data: {json.dumps(doc)}\n\n"

    state.inflight += 1
    future = asyncio.ensure_future(state.call(state.pool.generate, entry, text, templated, on_text=on_text, **kw))
    future.add_done_callback(lambda _f: loop.call_soon_threadsafe(queue.put_nowait, None))
    try:
        if chat:
            for i in range(kw["n"]):
                yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        while True:
            item = await queue.get()
            if item is None:
                break
            i, delta = item
            if chat:
                yield chunk([{"index": i, "delta": {"content": delta}, "finish_reason": None}])
            else:
                yield chunk([{"index": i, "text": delta, "finish_reason": None, "logprobs": None}])
        try:
            results = future.result()
        except Exception as exc:  # the model failed mid-stream: say so in the stream
            err = {"error": {"message": f"generation failed: {type(exc).__name__}", "type": "server_error"}}
            yield f"data: {json.dumps(err)}\n\n"
            yield "data: [DONE]\n\n"
            return
        for i, r in enumerate(results):
            if chat:
                yield chunk([{"index": i, "delta": {}, "finish_reason": r["finish_reason"]}])
            else:
                yield chunk([{"index": i, "text": "", "finish_reason": r["finish_reason"], "logprobs": None}])
        completion_tokens = sum(r["completion_tokens"] for r in results)
        state.requests += 1
        state.tokens += completion_tokens
        if include_usage:
            p = results[0]["prompt_tokens"]
            usage = {"prompt_tokens": p, "completion_tokens": completion_tokens, "total_tokens": p + completion_tokens}
            yield chunk([], usage)
        yield "data: [DONE]\n\n"
    finally:
        state.inflight -= 1


# -- admin ----------------------------------------------------------------------------------------


async def admin_stats(request: Request) -> Response:
    state: State = request.app.state.primenb
    return JSONResponse(
        {
            "models": list(state.pool.entries),
            "requests": state.requests,
            "completion_tokens": state.tokens,
            "inflight": state.inflight,
            "uptime_s": round(time.time() - state.started, 1),
            "stopping": state.stopping,
            "rss_bytes": rss_bytes(),
            "weight_bytes": state.pool.weight_bytes(),
        }
    )


async def admin_add(request: Request) -> Response:
    state: State = request.app.state.primenb
    spec = await _json_body(request)
    if not isinstance(spec.get("id"), str) or not isinstance(spec.get("checkpoint"), str):
        raise ApiError("an adapter needs 'id' and 'checkpoint' (strings)", 400)
    entry = await state.call(state.loader, spec)
    return JSONResponse(_model_card(state, entry.id), status_code=201)


async def admin_remove(request: Request) -> Response:
    state: State = request.app.state.primenb
    served_id = request.path_params["model_id"]
    await state.call(state.pool.remove, served_id)
    return JSONResponse({"id": served_id, "deleted": True})


async def admin_shutdown(request: Request) -> Response:
    """Stop taking requests, finish those in flight, then exit (the worker watches ``stopping``)."""
    state: State = request.app.state.primenb
    state.stopping = True
    return JSONResponse({"stopping": True, "inflight": state.inflight})


# -- app ------------------------------------------------------------------------------------------


class _Guard:
    """Pure ASGI middleware: the Bearer key on every route, and 503 while stopping."""

    def __init__(self, app: Any, state: State) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        response = self._refuse(scope)
        if response is None:
            await self.app(scope, receive, send)
        else:
            await response(scope, receive, send)

    def _refuse(self, scope: dict[str, Any]) -> Response | None:
        if self.state.api_key:
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode("latin-1")
            given = auth[7:] if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), self.state.api_key.encode()):
                return error_response(
                    "Missing or wrong API key: send 'Authorization: Bearer <key>'.", 401, code="invalid_api_key"
                )
        if self.state.stopping and scope.get("path", "").startswith("/v1/"):
            return error_response("The server is stopping; start it again with %prime_serve.", 503)
        return None


def rss_bytes() -> int:
    """Resident memory of this process (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open("/proc/self/status") as f:
            lines = f.read().splitlines()
        for line in lines:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServeError)
    return error_response(str(exc), exc.status, exc.param, exc.code)


async def _internal(request: Request, exc: Exception) -> Response:
    return error_response(f"internal error: {type(exc).__name__}", 500)  # the type only: no request text


async def _not_found(request: Request, exc: Exception) -> Response:
    return error_response(f"No route {request.method} {request.url.path}.", 404)


def build_app(state: State) -> Any:
    routes = [
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model_id:path}", get_model, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/admin/stats", admin_stats, methods=["GET"]),
        Route("/admin/models", admin_add, methods=["POST"]),
        Route("/admin/models/{model_id:path}", admin_remove, methods=["DELETE"]),
        Route("/admin/shutdown", admin_shutdown, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: _not_found, 405: _not_found, ServeError: _api_error, Exception: _internal},
    )
    app.state.primenb = state
    return _Guard(app, state)


__all__ = ["ApiError", "State", "build_app", "error_response"]
