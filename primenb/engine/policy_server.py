"""The policy as it trains, served inside the training process to verifiers' training client.

A verifiers environment's episodes call their model over HTTP (verifiers' ``TrainClient`` renders
each turn to token ids and POSTs them to vLLM's ``/inference/v1/generate``). During a GRPO step the
trainer waits for those episodes, so the same module it trains (its LoRA adapter active) can answer
them: nothing is copied or synchronised between steps, as prime-rl's orchestrator needs with a
separate vLLM. The server listens on 127.0.0.1 only, on a port the OS picks, and answers only
requests that carry its bearer token.

Generation goes through the serving scheduler (`primenb.engine.batching`): every episode's turn in
flight decodes in one batch, each row with its own seed, and the answer is vLLM's: the sampled ids
ending with the stop token, and their log-probabilities named ``token_id:N``.

Routes: ``GET /v1/models`` (the one served id, with ``max_model_len``), ``POST
/inference/v1/generate``. Requests are bounded (body size, prompt length, vocabulary), answered
with a 4xx that names the field, never a traceback.
"""

from __future__ import annotations

import json
import logging
import queue
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from primenb.engine.batching import Scheduler
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import Delta as _Delta
from primenb.engine.serve_requests import Done, Failed, Finished, GenRequest, Sampling
from primenb.engine.serving import ModelPool
from primenb.protocol import openai_api as api

log = logging.getLogger("primenb.engine")

MAX_BODY = 8 * 1024 * 1024
GENERATE_ROUTE = api.GENERATE
# A request waits at most this long for its tokens: an episode whose turn never comes back fails
# (verifiers records the error) instead of holding the training step forever.
ANSWER_TIMEOUT_S = 600.0
GONE_POLL_S = 0.25  # how often a waiting request checks that its client is still connected


STOPPING_MESSAGE = "the training run is stopping: this generation was cancelled"


class ClientGone(Exception):
    """The client closed its connection before its answer: its generation was cancelled."""


class _Sampling(BaseModel):
    """The sampling parameters verifiers' training client sends (``renderers.client.generate``
    forwards verifiers' ``SamplingConfig``); anything else would change the answer unseen: refused."""

    model_config = ConfigDict(extra="forbid")

    max_tokens: StrictInt | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=100.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: StrictInt = -1
    min_p: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: StrictInt | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    n: StrictInt = Field(default=1, ge=1, le=1)
    stop_token_ids: list[StrictInt] | None = Field(default=None, max_length=64)
    logprobs: StrictInt | None = Field(default=None, ge=0, le=1)
    skip_special_tokens: StrictBool = True
    repetition_penalty: float = Field(default=1.0, gt=0.0, le=10.0)
    presence_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    frequency_penalty: float = Field(default=0.0, ge=-2.0, le=2.0)
    min_tokens: StrictInt = Field(default=0, ge=0)


class _Generate(BaseModel):
    model_config = ConfigDict(extra="ignore")  # metadata (request_id, cache_salt, ...) changes nothing

    token_ids: list[StrictInt] = Field(min_length=1)
    sampling_params: _Sampling = _Sampling()
    model: str | None = None


class PolicyServer:
    """Serve ``model`` (the module the trainer trains) as ``served_id`` on 127.0.0.1."""

    def __init__(self, model: Any, tokenizer: Any, *, served_id: str = "policy", max_batch: int = 64) -> None:
        self.served_id = served_id
        self.api_key = secrets.token_urlsafe(24)
        self.pool = ModelPool(device=str(next(model.parameters()).device))
        self.entry = self.pool.add_live(served_id, model, tokenizer)
        self.scheduler = Scheduler(self.pool, max_batch=max_batch, max_queue=4096)
        self.vocab = self.pool.vocab_size(self.entry)
        self.context = self.pool.context_limit(self.entry)
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="primenb-policy-http", daemon=True)
        self._stopping = threading.Event()
        self.answered = 0  # generate requests answered in full (told when a step is cancelled)
        self._count_lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_port}/v1"

    def start(self) -> PolicyServer:
        self.scheduler.start()
        self._thread.start()
        log.info("policy served to the episodes at %s as %r", self.base_url, self.served_id)
        return self

    def stop_generating(self) -> None:
        """The run is stopping: every generation in flight ends (its request answers 503) within
        a poll, and later requests are refused, so a cancelled step decodes nothing more."""
        self._stopping.set()

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self.scheduler.close()

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a request thread runs ----------------------------------------------------------------
    def models(self) -> dict[str, Any]:
        card = {"id": self.served_id, "object": api.MODEL, "owned_by": "primenb", "max_model_len": self.context}
        return {"object": api.LIST, "data": [card]}

    def generate(self, body: bytes, gone: Callable[[], bool] = lambda: False) -> dict[str, Any]:
        """The answer to one generate request; ``gone`` says whether its client has left (an
        episode cancelled, verifiers' timeout): its rows are then dropped, not decoded to the end."""
        if self._stopping.is_set():
            raise ServeError(STOPPING_MESSAGE, ErrorKind.STOPPING)
        try:
            req = _Generate.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            raise ServeError(f"{where}: {first['msg']}", ErrorKind.INVALID, where) from None
        if req.model not in (None, self.served_id):
            raise ServeError(
                f"The model {req.model!r} does not exist; this server serves {self.served_id!r}.", ErrorKind.NOT_FOUND
            )
        bad = [t for t in req.token_ids if not 0 <= t < self.vocab]
        if bad:
            raise ServeError(
                f"token_ids: {bad[0]} is outside the vocabulary (0..{self.vocab - 1})", ErrorKind.INVALID, "token_ids"
            )
        s = req.sampling_params
        max_tokens = self.context - len(req.token_ids)
        if max_tokens < 1:
            raise ServeError(
                f"token_ids: the prompt is {len(req.token_ids)} tokens; the model's context is {self.context}",
                ErrorKind.INVALID,
                "token_ids",
            )
        sampling = Sampling(
            max_tokens=min(s.max_tokens or max_tokens, max_tokens),
            temperature=s.temperature,
            top_p=s.top_p,
            top_k=max(0, s.top_k),
            min_p=s.min_p,
            seed=s.seed,
            stop_token_ids=tuple(s.stop_token_ids or ()),
            logprobs=True,
            skip_special_tokens=s.skip_special_tokens,
            repetition_penalty=s.repetition_penalty,
            presence_penalty=s.presence_penalty,
            frequency_penalty=s.frequency_penalty,
            min_tokens=s.min_tokens,
            tokens_as_ids=True,
        )
        return self._run(GenRequest(self.served_id, list(req.token_ids), sampling, param="token_ids"), gone)

    def _run(self, gen: GenRequest, gone: Callable[[], bool]) -> dict[str, Any]:
        prompt = list(gen.prompt) if isinstance(gen.prompt, list) else []
        events: queue.Queue[Any] = queue.Queue()
        gen.emit = events.put
        self.scheduler.submit(gen)
        ids: list[int] = []
        logprobs: list[dict[str, Any]] = []
        finish = "stop"
        quiet_until = time.monotonic() + ANSWER_TIMEOUT_S
        look_at = time.monotonic() + GONE_POLL_S
        while True:
            try:
                event = events.get(timeout=GONE_POLL_S)
            except queue.Empty:
                event = None
            now = time.monotonic()
            if now >= look_at:  # checked while tokens flow too: a long answer is the one to cut
                look_at = now + GONE_POLL_S
                if gone():
                    gen.cancel()
                    raise ClientGone
                if self._stopping.is_set():
                    gen.cancel()
                    raise ServeError(STOPPING_MESSAGE, ErrorKind.STOPPING)
            if event is None:
                if now > quiet_until:  # no token for ANSWER_TIMEOUT_S
                    gen.cancel()
                    raise ServeError("generation timed out", ErrorKind.TIMED_OUT)
                continue
            quiet_until = now + ANSWER_TIMEOUT_S
            if isinstance(event, _Delta):
                ids += event.token_ids
                logprobs += [_entry(t, e.logprob) for t, e in zip(event.token_ids, event.logprobs or [], strict=True)]
            elif isinstance(event, Finished):
                finish = event.reason
                if event.stop_token is not None:
                    ids.append(event.stop_token)
                    lp = event.stop_logprob.logprob if event.stop_logprob is not None else None
                    logprobs.append(_entry(event.stop_token, lp))
            elif isinstance(event, Failed):
                raise event.error
            elif isinstance(event, Done):
                break
        with self._count_lock:
            self.answered += 1
        return {
            "request_id": f"generate-tokens-{secrets.token_hex(8)}",
            "model": self.served_id,
            "choices": [{"index": 0, "token_ids": ids, "logprobs": {"content": logprobs}, "finish_reason": finish}],
            "prompt_token_ids": prompt,
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids)},
        }


def _entry(token: int, logprob: float | None) -> dict[str, Any]:
    return {"token": f"token_id:{token}", "logprob": -9999.0 if logprob is None else max(float(logprob), -9999.0)}


def _handler(server: PolicyServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("policy server: " + format, *args)

        def _authorised(self) -> bool:
            given = self.headers.get_all("Authorization") or []
            return len(given) == 1 and secrets.compare_digest(given[0], f"Bearer {server.api_key}")

        def _send(self, status: int, doc: dict[str, Any]) -> None:
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _client_gone(self) -> bool:
            """The client closed its end: the socket reads as ended (a pipelined request's bytes
            would read as data, not as the end)."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _error(self, error: ServeError) -> None:
            self._send(error.status, {"error": {"message": str(error), "code": error.status, "param": error.param}})

        def do_GET(self) -> None:
            if not self._authorised():
                return self._error(ServeError("missing or wrong bearer token", ErrorKind.UNAUTHORISED))
            if self.path.rstrip("/") == api.MODELS:
                return self._send(200, server.models())
            return self._error(ServeError(f"no route {self.path[:100]!r}", ErrorKind.NOT_FOUND))

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True
                return self._error(
                    ServeError(f"the body must be 0..{MAX_BODY} bytes with a Content-Length", ErrorKind.TOO_LARGE)
                )
            body = self.rfile.read(length)
            if not self._authorised():
                return self._error(ServeError("missing or wrong bearer token", ErrorKind.UNAUTHORISED))
            if self.path != GENERATE_ROUTE:
                return self._error(ServeError(f"no route {self.path[:100]!r}", ErrorKind.NOT_FOUND))
            try:
                self._send(200, server.generate(body, self._client_gone))
            except ClientGone:
                self.close_connection = True  # nobody to answer
                log.debug("policy server: a client left before its answer; its generation was cancelled")
            except ServeError as exc:
                self._error(exc)
            except Exception as exc:  # a bug must answer (the episode records it), not hang the client
                log.exception("policy server: generate failed")
                self._error(ServeError(f"generation failed: {type(exc).__name__}", ErrorKind.FAILED))

    return Handler


__all__ = ["GENERATE_ROUTE", "PolicyServer"]
