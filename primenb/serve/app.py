"""The OpenAI-compatible HTTP face of the server (Starlette): ``/v1/models``, ``/v1/chat/completions``,
``/v1/completions`` (plain and ``stream``), vLLM's ``/health``, ``/version``, LoRA-adapter routes and
token route (``/inference/v1/generate``, `primenb.serve.generate`),
OpenAI's error shape, Bearer keys, and the admin routes that add and remove models.

The event loop only parses, queues and streams: every model, tokenizer and adapter sits behind
the scheduler's thread (`primenb.engine.batching`), reached through ``GenRequest`` events and
``scheduler.call``. A client that goes away (a dropped stream, a timeout) cancels its request;
its rows leave the batch at the next decode step. Nothing of a prompt or a completion is logged.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from primenb.commands import ServeStartArgs
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import Admitted, Delta, Done, Event, Failed, Finished, GenRequest
from primenb.protocol import openai_api as api
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.stage import FINAL
from primenb.protocol.sysinfo import primenb_version
from primenb.serve import adapters, guard
from primenb.serve.protocol import AddModel, ChatRequest, CompletionRequest, LoadLora, UnloadLora
from primenb.serve.wire import Choices, Pacing, StreamChunks, ToolMode, chat_chunk, error_body, usage

OWNER = "primenb"
M = TypeVar("M", bound=BaseModel)


def error_response(
    message: str,
    status: int,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(message, status, param, code), status_code=status, headers=headers)


@dataclass
class State:
    """What the routes share: the scheduler (which owns the models), the served ids' cards, the key,
    and where the server listens (for the same-origin checks)."""

    scheduler: Any
    api_key: str | None
    loader: Callable[[dict[str, Any]], Any]  # spec -> served entry, run on the scheduler's thread
    host: str = ServeStartArgs.host
    port: int = 0
    max_body: int = guard.MAX_BODY
    stream_interval: int = 1  # vLLM's: a streamed row's tokens go out every this many (`wire.Pacing`)
    started: float = field(default_factory=time.time)
    cards: dict[str, dict[str, Any]] = field(default_factory=dict)  # replaced whole, never edited

    @property
    def stopping(self) -> bool:
        return bool(self.scheduler.stopping)

    def refresh_cards(self) -> None:
        """Snapshot the served ids (on the scheduler's thread, after an add or remove)."""
        pool = self.scheduler.pool
        self.cards = {sid: model_card(self, pool, entry) for sid, entry in pool.entries.items()}

    async def on_scheduler(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.wrap_future(self.scheduler.call(fn, *args))


def model_card(state: State, pool: Any, entry: Any) -> dict[str, Any]:
    return {
        "id": entry.id,
        "object": api.MODEL,
        "created": int(state.started),
        "owned_by": OWNER,
        "root": entry.root or entry.id,
        "parent": entry.parent,
        "max_model_len": pool.context_limit(entry),
        "permission": [],
        "primenb": {
            "kind": entry.kind,
            "trace": entry.trace,
            "stage": getattr(entry, "stage", FINAL),
            "prompt_format": pool.prompt_format(entry),
            "renderer": pool.renderer(entry).name,
            "tool_call_parser": pool.tool_call_parser(entry),
        },
    }


# -- parsing --------------------------------------------------------------------------------------


# how pydantic names the branch of a union an error came from: a type, never a field
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "tuple", "none", "bytes"})


def _param(loc: tuple[Any, ...]) -> str | None:
    """A pydantic error location as OpenAI names a field: ``messages[0].content``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier() and part not in _UNION_TAGS:
            out += f".{part}" if out else part
        else:
            break  # a union branch's tag ("list[str]", "function-after[...]"): not a field
    return out or None


def parse(model: type[M], raw: bytes) -> M:
    """A request body as ``model``, or a 400 naming the field (bad JSON, deep nesting, lone
    surrogates, wrong types, unknown fields: pydantic's own JSON parser reads it strictly)."""
    try:
        return model.model_validate_json(raw or b"")
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        param = _param(tuple(err.get("loc") or ()))
        if err["type"] == "extra_forbidden":
            raise ServeError(
                f"Unknown field '{param}': this server does not know or honour it; remove it.",
                ErrorKind.INVALID,
                param,
                "unsupported_parameter",
            ) from None
        if err["type"] == "json_invalid":
            raise ServeError(f"The request body is not valid JSON ({err['msg']}).", ErrorKind.INVALID) from None
        where = f"'{param}': " if param else ""
        raise ServeError(f"{where}{err['msg']}.", ErrorKind.INVALID, param) from None


# -- cancellation ---------------------------------------------------------------------------------


async def _until_disconnect(request: Request) -> None:
    """Returns when the client goes away (the body is read by then, so only a disconnect comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def cancellable(request: Request, work: Awaitable[Response]) -> Response:
    """Run a route's work; if the client disconnects first, cancel it (its ``finally`` cancels the
    generation, so the rows leave the batch at the next step). vLLM's ``with_cancellation``."""
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_until_disconnect(request))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not job.done():
        job.cancel()
        return Response(status_code=499)  # nobody reads it: the client is gone
    return job.result()


def _emitter(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[int, Event]], i: int) -> Any:
    """``req.emit_all`` for request ``i``: called on the scheduler's thread once per step, one hop
    onto the event loop with that step's events."""

    def put(events: list[Event]) -> None:
        for event in events:
            queue.put_nowait((i, event))

    def emit_all(events: list[Event]) -> None:
        loop.call_soon_threadsafe(put, events)

    return emit_all


class _Run:
    """The requests of one HTTP call (``/v1/completions`` may carry several prompts), their events
    merged on one queue; ``close`` cancels whatever is still running."""

    def __init__(self, state: State, requests: list[GenRequest]) -> None:
        self.requests = requests
        self.queue: asyncio.Queue[tuple[int, Event]] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        for i, req in enumerate(requests):
            req.emit_all = _emitter(loop, self.queue, i)
        self.pending = len(requests)
        self.prompt_tokens = 0
        self.seeds: list[int] = []
        try:
            for req in requests:
                state.scheduler.submit(req)
        except ServeError:
            self.close()
            raise

    async def admitted(self) -> list[tuple[int, Event]]:
        """Wait until every request is tokenised and fits (or raise its 4xx); the events that
        came meanwhile (an echo's prompt text) are returned to be sent first."""
        waiting = set(range(len(self.requests)))
        early: list[tuple[int, Event]] = []
        while waiting:
            i, event = await self.queue.get()
            if isinstance(event, Failed):
                self.close()
                raise event.error
            if isinstance(event, Admitted):
                waiting.discard(i)
                self.prompt_tokens += event.prompt_tokens
                self.seeds.append(event.seed)
            else:  # one prompt of several can finish before the last is admitted
                self.pending -= isinstance(event, Done)
                early.append((i, event))
        return early

    async def batches(self) -> AsyncIterator[list[tuple[int, Event]]]:
        """The events in order, every event already waiting taken at once (a stream that fell behind
        the decode steps catches up in one write); a failure raises after the events before it."""
        while self.pending:
            batch = [await self.queue.get()]
            while not self.queue.empty():
                batch.append(self.queue.get_nowait())
            for k, (_, event) in enumerate(batch):
                if isinstance(event, Failed):
                    if k:
                        yield batch[:k]
                    raise event.error
                self.pending -= isinstance(event, Done)
            yield batch

    async def events(self) -> AsyncIterator[tuple[int, Event]]:
        async for batch in self.batches():
            for item in batch:
                yield item

    def close(self) -> None:
        for req in self.requests:
            req.cancel()


# -- routes ---------------------------------------------------------------------------------------


async def list_models(request: Request) -> Response:
    state: State = request.app.state.primenb
    return JSONResponse({"object": api.LIST, "data": list(state.cards.values())})


async def get_model(request: Request) -> Response:
    state: State = request.app.state.primenb
    served_id = request.path_params["model_id"]
    card = state.cards.get(served_id)
    if card is None:
        raise _unknown_model(state, served_id)
    return JSONResponse(card)


def _unknown_model(state: State, served_id: str) -> ServeError:
    known = ", ".join(sorted(state.cards)) or "none"
    shown = served_id if len(served_id) <= 80 else served_id[:80] + "…"
    return ServeError(
        f"The model {shown!r} does not exist. Served models: {known}.", ErrorKind.NOT_FOUND, "model", "model_not_found"
    )


async def chat_completions(request: Request) -> Response:
    state: State = request.app.state.primenb
    body = parse(ChatRequest, await request.body())
    refused = body.refused()
    if refused is not None:
        raise refused
    card = state.cards.get(body.model)
    if card is None:
        raise _unknown_model(state, body.model)
    tools = _tool_mode(body, card)
    req = GenRequest(body.model, body.conversation(), body.sampling())
    return await cancellable(request, _respond(state, body, [req], chat=True, tools=tools))


def _tool_mode(body: ChatRequest, card: dict[str, Any]) -> ToolMode | None:
    """How the reply is parsed for calls, or a 400 when the model cannot take the tools."""
    if not body.tools_on:
        return None
    parser = (card.get("primenb") or {}).get("tool_call_parser")
    if not parser:
        renderer = (card.get("primenb") or {}).get("renderer")
        raise ServeError(
            f"The model {body.model!r} takes no tools here: its renderer ({renderer}) has no tool-call "
            "format this server parses (hermes <tool_call> blocks or Llama 3 JSON). Send the request "
            "without 'tools', or serve a model whose chat template has tool support.",
            ErrorKind.INVALID,
            "tools",
            "unsupported_parameter",
        )
    return ToolMode(str(parser), parallel=body.parallel_tool_calls is not False)


async def completions(request: Request) -> Response:
    state: State = request.app.state.primenb
    body = parse(CompletionRequest, await request.body())
    refused = body.refused()
    if refused is not None:
        raise refused
    if body.model not in state.cards:
        raise _unknown_model(state, body.model)
    sampling = body.sampling()
    reqs = [GenRequest(body.model, p, sampling) for p in body.prompts()]
    queue = int(getattr(state.scheduler, "max_queue", len(reqs)))
    if len(reqs) > queue:  # it could never be queued whole: a 429 would be retried for ever
        raise ServeError(
            f"{len(reqs)} prompts are more than this server queues at once ({queue}, its --max-queue); "
            "send fewer per request.",
            ErrorKind.INVALID,
            "prompt",
        )
    return await cancellable(request, _respond(state, body, reqs, chat=False))


async def _respond(
    state: State,
    body: ChatRequest | CompletionRequest,
    reqs: list[GenRequest],
    *,
    chat: bool,
    tools: ToolMode | None = None,
) -> Response:
    run = _Run(state, reqs)
    n = reqs[0].sampling.n
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    created = int(time.time())
    try:
        early = await run.admitted()
    except BaseException:
        run.close()
        raise
    headers = {"x-primenb-seed": ",".join(str(s) for s in run.seeds)}
    if body.stream:
        stream = _stream(run, early, body, rid, created, chat=chat, n=n, tools=tools, interval=state.stream_interval)
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
    t0 = time.perf_counter()
    try:
        choices = Choices(len(reqs) * n, chat=chat, tools=tools)
        for i, event in [*early, *[x async for x in run.events()]]:
            choices.add(i * n, event)
    finally:
        run.close()
    headers["x-primenb-generate-seconds"] = f"{time.perf_counter() - t0:.4f}"
    obj = api.completion_object(chat, chunk=False)
    doc = {
        "id": rid,
        "object": obj,
        "created": created,
        "model": body.model,
        "choices": choices.final(),
        "usage": usage(run.prompt_tokens, choices.completion_tokens),
    }
    return JSONResponse(doc, headers=headers)


async def _stream(
    run: _Run,
    early: list[tuple[int, Event]],
    body: ChatRequest | CompletionRequest,
    rid: str,
    created: int,
    *,
    chat: bool,
    n: int,
    tools: ToolMode | None = None,
    interval: int = 1,
) -> AsyncIterator[str]:
    """Server-sent events; with ``include_usage`` every chunk carries ``usage: null`` and a last
    chunk carries the totals. Starlette cancels this generator when the client goes away; the
    ``finally`` then cancels the generation. With tools, each choice's text streams until a call
    may begin; the calls go out whole when the choice ends. The events that waited together on
    the queue go out as one write, each row's text merged (`Pacing`, which also applies
    ``interval``)."""
    with_usage = body.include_usage
    base = {"id": rid, "created": created, "model": body.model}
    completion_tokens = 0
    chunks = StreamChunks(base, chat=chat, with_usage=with_usage, tools=tools)
    pacing = Pacing(interval)

    try:
        if chat:
            yield "".join(chat_chunk(base, i, role=True, with_usage=with_usage) for i in range(len(run.requests) * n))

        async def batches() -> AsyncIterator[list[tuple[int, Event]]]:
            if early:
                yield early
            async for batch in run.batches():
                yield batch

        try:
            async for batch in batches():
                out: list[str] = []
                for i, event in pacing.release(batch):
                    if isinstance(event, Delta) and (event.text or event.logprobs):  # a token's text may wait
                        chunk = chunks.delta(i * n + event.index, event)
                        if chunk is not None:
                            out.append(chunk)
                    elif isinstance(event, Finished):
                        completion_tokens += event.completion_tokens
                        out += chunks.end(i * n + event.index, event.reason)
                if out:
                    yield "".join(out)
        except ServeError as exc:  # the model failed mid-stream: say so in the stream
            yield f"data: {_json(error_body(str(exc), exc.status, exc.param, exc.code))}\n\n"
            yield "data: [DONE]\n\n"
            return
        last = ""
        if with_usage:
            obj = api.completion_object(chat, chunk=True)
            totals = usage(run.prompt_tokens, completion_tokens)
            last = f"data: {_json({**base, 'object': obj, 'choices': [], 'usage': totals})}\n\n"
        yield last + "data: [DONE]\n\n"
    finally:
        run.close()


def _json(doc: Any) -> str:
    import json

    return json.dumps(doc, ensure_ascii=False)


# -- vLLM's small routes --------------------------------------------------------------------------


async def health(request: Request) -> Response:
    state: State = request.app.state.primenb
    return Response(status_code=503 if state.stopping else 200)


async def version(request: Request) -> Response:
    return JSONResponse({"version": primenb_version(), "engine": "primenb"})


# -- admin ----------------------------------------------------------------------------------------


async def admin_stats(request: Request) -> Response:
    state: State = request.app.state.primenb
    stats = await state.on_scheduler(_pool_stats, state)
    return JSONResponse(stats)


def _pool_stats(state: State) -> dict[str, Any]:
    return {
        "models": list(state.scheduler.pool.entries),
        **state.scheduler.stats(),
        "uptime_s": round(time.time() - state.started, 1),
        "stopping": state.stopping,
        "rss_bytes": rss_bytes(),
        "weight_bytes": state.scheduler.pool.weight_bytes(),
    }


async def _add(state: State, spec: AddModel, *, adapter_only: bool = False) -> Any:
    checkpoint = guard.checkpoint_in_run_dir(spec.checkpoint)
    if adapter_only and not CheckpointDir(checkpoint).is_adapter():
        raise ServeError(
            f"{spec.checkpoint} is not a LoRA adapter checkpoint (no {CheckpointDir.ADAPTER_CONFIG}).",
            ErrorKind.INVALID,
        )
    given = spec.model_dump(exclude_unset=True)
    found = await asyncio.to_thread(adapters.from_trace, checkpoint, given, state.cards)

    def load() -> Any:
        entry = state.loader({**spec.model_dump(), **found, "checkpoint": str(checkpoint)})
        state.refresh_cards()
        return entry

    return await state.on_scheduler(load)


async def _remove(state: State, served_id: str, *, lora_only: bool = False) -> None:
    def remove() -> None:
        if lora_only:
            adapters.check_unload(state.scheduler.pool.entries, served_id)
        state.scheduler.remove(served_id)
        state.refresh_cards()

    await state.on_scheduler(remove)


async def admin_add(request: Request) -> Response:
    state: State = request.app.state.primenb
    spec = parse(AddModel, await request.body())
    entry = await _add(state, spec)
    return JSONResponse(state.cards[entry.id], status_code=201)


async def admin_remove(request: Request) -> Response:
    state: State = request.app.state.primenb
    served_id = request.path_params["model_id"]
    await _remove(state, served_id)
    return JSONResponse({"id": served_id, "deleted": True})


async def load_lora_adapter(request: Request) -> Response:
    state: State = request.app.state.primenb
    body = parse(LoadLora, await request.body())
    await _add(state, AddModel(id=body.lora_name, checkpoint=body.lora_path), adapter_only=True)
    return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")


async def unload_lora_adapter(request: Request) -> Response:
    state: State = request.app.state.primenb
    body = parse(UnloadLora, await request.body())
    await _remove(state, body.lora_name, lora_only=True)
    return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")


async def admin_shutdown(request: Request) -> Response:
    """Stop taking requests; the worker gives those in flight a moment, then aborts them and exits."""
    state: State = request.app.state.primenb
    state.scheduler.stop_admitting()
    return JSONResponse({"stopping": True, "inflight": state.scheduler.stats()["inflight"]})


def rss_bytes() -> int:
    """Resident memory of this process (Linux ``/proc``; 0 elsewhere)."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


# -- app ------------------------------------------------------------------------------------------


async def api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ServeError)
    headers = {"Retry-After": "1"} if exc.kind is ErrorKind.BUSY else None
    return error_response(str(exc), exc.status, exc.param, exc.code, headers)


async def http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return error_response(
            f"{request.method} is not allowed on {request.url.path}.", 405, headers=dict(exc.headers or {})
        )
    if exc.status_code == 404:
        return error_response(f"No route {request.method} {request.url.path}.", 404)
    return error_response(str(exc.detail), exc.status_code, headers=dict(exc.headers or {}))


async def internal_error(request: Request, exc: Exception) -> Response:
    return error_response(f"internal error: {type(exc).__name__}", 500)  # the type only: no request text


ROUTES = [
    Route(api.HEALTH, health, methods=["GET"]),
    Route(api.VERSION, version, methods=["GET"]),
    Route(api.MODELS, list_models, methods=["GET"]),
    Route(api.MODELS + "/{model_id:path}", get_model, methods=["GET"]),
    Route(api.CHAT_COMPLETIONS, chat_completions, methods=["POST"]),
    Route(api.COMPLETIONS, completions, methods=["POST"]),
    Route(api.LOAD_LORA, load_lora_adapter, methods=["POST"]),
    Route(api.UNLOAD_LORA, unload_lora_adapter, methods=["POST"]),
    Route(api.ADMIN_STATS, admin_stats, methods=["GET"]),
    Route(api.ADMIN_MODELS, admin_add, methods=["POST"]),
    Route(api.ADMIN_MODELS + "/{model_id:path}", admin_remove, methods=["DELETE"]),
    Route(api.ADMIN_SHUTDOWN, admin_shutdown, methods=["POST"]),
]


__all__ = ["ROUTES", "State", "api_error", "error_response", "http_error", "internal_error", "parse"]
