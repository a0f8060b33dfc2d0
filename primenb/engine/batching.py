"""The scheduler behind ``%prime_serve``: one thread owns the models and decodes every request in
flight together, one token per row per step (iteration-level, or "continuous", batching).

- A request joins at the next step: its prompt is prefilled (with the others that join then) and
  its key/value cache is padded on the left and stacked onto the running batch.
- Requests for different LoRA adapters of one base share every forward pass (PEFT's mixed-adapter
  batches, ``adapter_names=``); a full fine-tune has weights of its own and decodes in its own batch.
- A row leaves the step after it finishes or its client goes away: cancellation costs at most one
  step, and its cache rows are dropped (the columns every remaining row pads are trimmed).
- Each row samples with its own generator (`primenb.engine.sampling`), so batching never changes
  what a seeded request says.

Everything that touches a model runs on this thread: rendering and tokenising prompts, adding and
removing adapters (``call``), decoding. The HTTP layer only submits requests and reads their events.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from primenb.engine.chat import Conversation
from primenb.engine.detok import TextStream
from primenb.engine.kvbatch import BASE_ROW, device_of, forward, stack, stackable, trim
from primenb.engine.sampling import RowSampler, logprob_entry, row_generator, token_text
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import (
    Admitted,
    Delta,
    Done,
    Event,
    Failed,
    Finished,
    GenRequest,
    TokenLogprob,
)
from primenb.engine.serving import Entry, ModelPool

log = logging.getLogger("primenb.serve")

# A prompt this many characters per token of context cannot fit whatever the tokenizer: refused
# without tokenising it (a 4 MB prompt would hold the scheduler for seconds).
MAX_CHARS_PER_TOKEN = 32


@dataclass
class _Prepared:
    entry: Entry
    ids: list[int]
    max_tokens: int
    prompt_text: str


@dataclass
class _Row:
    req: GenRequest
    index: int
    entry: Entry
    tokenizer: Any
    sampler: RowSampler
    text: TextStream
    eos: frozenset[int]  # the end of text (unless ignore_eos) and the request's stop_token_ids
    max_tokens: int
    pos: int  # position id of ``next_token``: the prompt's length, then one more per step
    next_token: int = 0
    generated: int = 0
    finished: bool = False

    @property
    def adapter(self) -> str:
        return self.entry.adapter or BASE_ROW


@dataclass
class _Live:
    """A request with rows in flight: its totals, and how many rows are still decoding."""

    prompt_tokens: int
    rows_left: int
    completion_tokens: int = 0


@dataclass
class _Group:
    """The rows decoding on one set of weights, with their stacked cache and attention mask."""

    key: str
    rows: list[_Row] = field(default_factory=list)
    cache: Any = None
    mask: torch.Tensor | None = None  # [rows, cache length]: 1 real token, 0 left padding
    joiners: list[tuple[GenRequest, _Prepared]] = field(default_factory=list)
    mergeable: bool = True  # full-attention caches stack; sliding-window ones join an empty batch only


class Scheduler:
    """Owns the `ModelPool`; ``submit`` from any thread, events come back through ``req.emit``."""

    def __init__(
        self, pool: ModelPool, *, max_batch: int = 32, max_queue: int = 256, prefill_tokens: int = 8192
    ) -> None:
        self.pool = pool
        self.max_batch = max(1, int(max_batch))
        self.max_queue = max(1, int(max_queue))
        self.prefill_tokens = max(1, int(prefill_tokens))
        self._cond = threading.Condition()
        self._waiting: deque[GenRequest] = deque()
        self._prepared: dict[int, _Prepared] = {}  # id(request) -> its tokens, once rendered
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]]] = deque()
        self._groups: dict[str, _Group] = {}
        self._live: dict[int, _Live] = {}
        self._retired: list[Entry] = []  # removed while rows still decode on them
        self._outbox: dict[int, tuple[GenRequest, list[Event]]] = {}  # this step's events, per request
        self.stopping = False
        self._closed = False
        self._abort = False
        self.requests = 0
        self.completion_tokens = 0
        self.steps = 0
        self.rows_stepped = 0
        self._thread = threading.Thread(target=self._run, name="primenb-scheduler", daemon=True)

    # -- any thread --------------------------------------------------------------------------------
    def start(self) -> Scheduler:
        self._thread.start()
        return self

    def submit(self, req: GenRequest) -> None:
        """Queue a request, or refuse it now: STOPPING while stopping, BUSY when the queue is full."""
        if req.sampling.n > self.max_batch:
            raise ServeError(
                f"'n' is {req.sampling.n}, more rows than this server decodes at once ({self.max_batch}, "
                "its --max-batch).",
                ErrorKind.INVALID,
                "n",
            )
        with self._cond:
            if self.stopping or self._closed:
                raise ServeError("The server is stopping; start it again with %prime_serve.", ErrorKind.STOPPING)
            if len(self._waiting) >= self.max_queue:
                raise ServeError(
                    f"The server's queue is full ({self.max_queue} requests waiting); retry shortly "
                    "(or start the server with a larger --max-queue).",
                    ErrorKind.BUSY,
                    code="rate_limit_exceeded",
                )
            self._waiting.append(req)
            self._cond.notify()

    def call(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Run ``fn(*args)`` on the scheduler thread between two steps (adding or removing models)."""
        future: Future[Any] = Future()
        with self._cond:
            if self._closed:
                future.set_exception(ServeError("The server is stopping.", ErrorKind.STOPPING))
                return future
            self._calls.append((fn, args, future))
            self._cond.notify()
        return future

    @property
    def busy(self) -> bool:
        return bool(self._waiting or self._live)

    def stop_admitting(self) -> None:
        """Refuse new requests (kind STOPPING); those queued or decoding go on."""
        with self._cond:
            self.stopping = True
            self._cond.notify()

    def abort_all(self) -> None:
        """Cancel every request queued or decoding (they end with finish reason ``abort``)."""
        with self._cond:
            self.stopping = True
            self._abort = True
            self._cond.notify()

    def close(self, timeout: float = 5.0) -> None:
        with self._cond:
            self.stopping = self._closed = True
            self._abort = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the scheduler thread ----------------------------------------------------------------------
    def _run(self) -> None:
        torch.set_grad_enabled(False)
        while True:
            with self._cond:
                while not (self._calls or self._waiting or self._live or self._closed or self._abort):
                    self._cond.wait(0.5)
                calls = list(self._calls)
                self._calls.clear()
                if self._abort:
                    self._abort = False
                    for req in self._waiting:
                        self._fail(req, ServeError("The server stopped before this request ran.", ErrorKind.STOPPING))
                    self._waiting.clear()
                    self._abort_rows()
                    self._flush()
                if self._closed and not calls:
                    return
            for fn, args, future in calls:
                try:
                    future.set_result(fn(*args))
                except BaseException as exc:  # the caller gets it; the scheduler goes on
                    future.set_exception(exc)
            self._flush()  # a removal fails the requests queued for the model
            try:
                self._iterate()
            except Exception as exc:  # a bug or an OOM in one step must not end the server
                log.exception("decode step failed")
                self._fail_everything(ServeError(f"generation failed: {type(exc).__name__}", ErrorKind.FAILED))
                self._flush()

    def _iterate(self) -> None:
        self._drop_cancelled()
        self._admit()
        self._flush()  # admissions and refusals first: a stream starts before its first step
        for group in list(self._groups.values()):
            if group.rows or group.joiners:
                self._step(group)
            if not group.rows and not group.joiners:
                self._groups.pop(group.key, None)
        self._release_retired()
        self._flush()

    def _emit(self, req: GenRequest, event: Event) -> None:
        self._outbox.setdefault(id(req), (req, []))[1].append(event)

    def _flush(self) -> None:
        outbox, self._outbox = self._outbox, {}
        for req, events in outbox.values():
            req.emit_all(events)

    # admission
    def _prepare(self, req: GenRequest) -> _Prepared:
        entry = self.pool.entry(req.model)
        limit = self.pool.context_limit(entry)
        chat = isinstance(req.prompt, Conversation)
        param = req.param or ("messages" if chat else "prompt")
        if isinstance(req.prompt, list):
            ids = [int(t) for t in req.prompt]
            vocab = self.pool.vocab_size(entry)
            if any(t >= vocab for t in ids):
                raise ServeError(
                    f"The prompt holds token ids outside the vocabulary (size {vocab}).", ErrorKind.INVALID, param
                )
            text = str(self.pool.tokenizer_for(entry).decode(ids))
        else:
            size = len(req.prompt) if isinstance(req.prompt, str) else req.prompt.size
            if size > MAX_CHARS_PER_TOKEN * limit:
                raise _too_long(limit, f"more than {MAX_CHARS_PER_TOKEN * limit} characters", param)
            ids, text = self.pool.prompt_ids(entry, req.prompt)
        outside = sorted(t for t in req.sampling.logit_bias if t >= self.pool.vocab_size(entry))
        if outside:
            raise ServeError(
                f"logit_bias names token ids outside the vocabulary (size {self.pool.vocab_size(entry)}): "
                f"{outside[:5]}.",
                ErrorKind.INVALID,
                "logit_bias",
            )
        if not ids:
            raise ServeError(f"The {param} is empty: there is nothing to continue from.", ErrorKind.INVALID, param)
        if len(ids) >= limit:
            raise _too_long(limit, str(len(ids)), param)
        left = limit - len(ids)
        asked = req.sampling.max_tokens
        return _Prepared(entry, ids, left if asked is None else min(asked, left), text)

    def _admit(self) -> None:
        rows = sum(len(g.rows) for g in self._groups.values())
        budget = self.prefill_tokens
        admitted = 0
        with self._cond:
            queue = list(self._waiting)
        for req in queue:
            if req.cancelled:
                self._unqueue(req)
                continue
            prepared = self._prepared.get(id(req))
            if prepared is None:
                try:
                    prepared = self._prepared[id(req)] = self._prepare(req)
                except ServeError as exc:
                    self._unqueue(req)
                    self._fail(req, exc)
                    continue
                self._emit(req, Admitted(len(prepared.ids), req.seed))
            n = req.sampling.n
            group = self._groups.get(prepared.entry.base_key)
            if rows + n > self.max_batch or (group is not None and group.rows and not group.mergeable):
                break  # first come, first served: nobody overtakes the head of the queue
            if admitted and len(prepared.ids) > budget:
                break  # this step's prefill is full; the rest join at the next
            self._unqueue(req)
            if group is None:
                group = self._groups[prepared.entry.base_key] = _Group(prepared.entry.base_key)
            group.joiners.append((req, prepared))
            rows += n
            budget -= len(prepared.ids)
            admitted += 1

    def _unqueue(self, req: GenRequest) -> None:
        with self._cond, contextlib.suppress(ValueError):
            self._waiting.remove(req)

    # one step of one group
    def _step(self, group: _Group) -> None:
        model = self.pool.model_for(group.key)
        peft = hasattr(model, "peft_config")
        device = group.mask.device if group.mask is not None else device_of(model)
        decoded: torch.Tensor | None = None
        if group.rows:
            assert group.mask is not None
            ids = torch.tensor([[r.next_token] for r in group.rows], device=device)
            ones = torch.ones(len(group.rows), 1, dtype=group.mask.dtype, device=device)
            mask = torch.cat([group.mask, ones], dim=1)
            pos = torch.tensor([[r.pos] for r in group.rows], device=device)
            adapters = [r.adapter for r in group.rows] if peft else None
            decoded = forward(model, ids, mask, pos, group.cache, adapters).float().cpu()  # sampled on the CPU
            group.mask = mask
            for r in group.rows:
                r.pos += 1
            self.steps += 1
            self.rows_stepped += len(group.rows)
        joined: list[_Row] = []
        first: torch.Tensor | None = None
        if group.joiners:
            joined, first = self._prefill(group, model, peft)
        if decoded is not None:
            for row, logits in zip(group.rows, decoded, strict=True):
                self._advance(row, logits)
        if first is not None:
            for row, logits in zip(joined, first, strict=True):
                self._advance(row, logits)
        group.rows.extend(joined)
        self._drop_finished(group)

    def _prefill(self, group: _Group, model: Any, peft: bool) -> tuple[list[_Row], torch.Tensor | None]:
        joiners, group.joiners = group.joiners, []
        rows: list[_Row] = []
        expand: list[int] = []
        prompts: list[tuple[GenRequest, _Prepared]] = []
        for req, prepared in joiners:
            self._prepared.pop(id(req), None)
            if req.cancelled:
                continue
            self._live[id(req)] = _Live(len(prepared.ids), req.sampling.n)
            if req.sampling.echo:
                self._echo(req, prepared, model, peft)
            new = [self._new_row(req, prepared, i) for i in range(req.sampling.n)]
            for row in new:
                if row.max_tokens <= 0:  # echo only: nothing to generate
                    self._finish(row, "length")
            live = [r for r in new if not r.finished]
            if live:
                expand += [len(prompts)] * len(live)
                prompts.append((req, prepared))
                rows += live
        if not prompts:
            return [], None
        device = device_of(model)
        width = max(len(p.ids) for _, p in prompts)
        ids = torch.tensor([[0] * (width - len(p.ids)) + p.ids for _, p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p.ids)) + [1] * len(p.ids) for _, p in prompts], device=device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        cache = DynamicCache(config=model.config)
        adapters = [p.entry.adapter or BASE_ROW for _, p in prompts] if peft else None
        logits = forward(model, ids, mask, pos, cache, adapters).float().cpu()
        if expand != list(range(len(prompts))):  # n > 1: each prompt's cache copied to its rows
            cache.batch_select_indices(torch.tensor(expand, device=device))
            mask, logits = mask[torch.tensor(expand, device=device)], logits[torch.tensor(expand)]
        if group.cache is None:
            group.mergeable = stackable(cache)
        group.cache, group.mask = stack(group.cache, group.mask, cache, mask)
        return rows, logits

    def _new_row(self, req: GenRequest, prepared: _Prepared, index: int) -> _Row:
        tok = self.pool.tokenizer_for(prepared.entry)
        s = req.sampling
        eos = frozenset(s.stop_token_ids) | (frozenset() if s.ignore_eos else self.pool.eos_ids(prepared.entry))
        vocab = self.pool.vocab_size(prepared.entry)
        repeat = torch.tensor(prepared.ids, dtype=torch.long) if s.repetition_penalty != 1.0 else None
        sampler = RowSampler(
            s,
            row_generator(req.seed, index),
            prompt_ids=repeat,
            stop_ids=tuple(sorted(t for t in eos if t < vocab)) if s.min_tokens else (),
        )
        text = TextStream(
            tok,
            s.stop,
            skip_special_tokens=s.skip_special_tokens,
            include_stop=s.include_stop_str_in_output,
            min_tokens=s.min_tokens,
        )
        return _Row(
            req=req,
            index=index,
            entry=prepared.entry,
            tokenizer=tok,
            sampler=sampler,
            text=text,
            eos=eos,
            max_tokens=prepared.max_tokens,
            pos=len(prepared.ids),
        )

    def _echo(self, req: GenRequest, prepared: _Prepared, model: Any, peft: bool) -> None:
        """``echo``: the prompt first, with its tokens' own log-probabilities when asked."""
        logprobs: list[TokenLogprob] | None = None
        if req.sampling.logprobs:
            tok = self.pool.tokenizer_for(prepared.entry)
            ids = torch.tensor([prepared.ids], device=device_of(model))
            mask = torch.ones_like(ids)
            pos = torch.arange(ids.shape[1], device=ids.device)[None]
            adapters = [prepared.entry.adapter or BASE_ROW] if peft else None
            full = forward(model, ids, mask, pos, DynamicCache(config=model.config), adapters, last_only=False)
            lp = torch.log_softmax(full[0].float().cpu(), dim=-1)
            as_ids = req.sampling.tokens_as_ids
            logprobs = [TokenLogprob(token_text(tok, prepared.ids[0], as_ids=as_ids), None)]
            for i, token in enumerate(prepared.ids[1:]):
                logprobs.append(logprob_entry(lp[i], token, req.sampling.top_logprobs, tok, as_ids=as_ids))
        for i in range(req.sampling.n):
            self._emit(req, Delta(i, prepared.prompt_text, logprobs))

    def _advance(self, row: _Row, logits: torch.Tensor) -> None:
        token, lp = row.sampler.choose(logits, row.tokenizer)
        if token in row.eos:  # a stop token: not in the text (unless asked) nor in the count
            shown = row.text.push(token) if row.req.sampling.include_stop_str_in_output else ""
            if shown:
                self._emit(row.req, Delta(row.index, shown))
            self._finish(row, "stop", token, lp)
            return
        row.generated += 1
        delta = row.text.push(token)
        row.next_token = token
        self._emit(row.req, Delta(row.index, delta, [lp] if lp is not None else None, [token]))
        if row.text.stopped:
            self._finish(row, "stop")
        elif row.generated >= row.max_tokens:
            self._finish(row, "length")

    def _finish(self, row: _Row, reason: str, stop_token: int | None = None, lp: TokenLogprob | None = None) -> None:
        if row.finished:
            return
        row.finished = True
        rest = row.text.close() if reason != "abort" else ""
        if rest:
            self._emit(row.req, Delta(row.index, rest))
        self._emit(row.req, Finished(row.index, reason, row.generated, stop_token, lp))
        live = self._live.get(id(row.req))
        if live is None:
            return
        live.completion_tokens += row.generated
        live.rows_left -= 1
        if live.rows_left == 0:
            del self._live[id(row.req)]
            self.requests += 1
            self.completion_tokens += live.completion_tokens
            self._emit(row.req, Done(live.prompt_tokens, live.completion_tokens))

    def _drop_finished(self, group: _Group) -> None:
        keep = [i for i, r in enumerate(group.rows) if not r.finished]
        if len(keep) == len(group.rows):
            return
        group.rows = [group.rows[i] for i in keep]
        if not group.rows:
            group.cache, group.mask = None, None
            return
        assert group.mask is not None
        group.cache.batch_select_indices(torch.tensor(keep, device=group.mask.device))
        group.mask = group.mask[keep]
        if group.mergeable:
            group.mask = trim(group.cache, group.mask)

    def _drop_cancelled(self) -> None:
        for group in self._groups.values():
            for row in group.rows:
                if row.req.cancelled:
                    self._finish(row, "abort")
            self._drop_finished(group)
            group.joiners = [(r, p) for r, p in group.joiners if not r.cancelled]

    def _abort_rows(self) -> None:
        for group in self._groups.values():
            for row in group.rows:
                self._finish(row, "abort")
            for req, _ in group.joiners:
                self._fail(req, ServeError("The server stopped before this request ran.", ErrorKind.STOPPING))
            group.joiners = []
            self._drop_finished(group)

    def _fail(self, req: GenRequest, error: ServeError) -> None:
        self._prepared.pop(id(req), None)
        self._live.pop(id(req), None)
        self._emit(req, Failed(error))

    def _fail_everything(self, error: ServeError) -> None:
        for group in self._groups.values():
            for row in group.rows:
                row.finished = True
                self._fail(row.req, error)
            for req, _ in group.joiners:
                self._fail(req, error)
        self._groups.clear()

    # models leaving
    def remove(self, served_id: str) -> Entry:
        """Stop serving ``served_id`` (call it through ``call``): new requests get NOT_FOUND at once,
        queued ones are refused, rows decoding on it finish, then its weights go."""
        entry = self.pool.detach(served_id)
        for req in list(self._waiting):
            prepared = self._prepared.get(id(req))
            if prepared is not None and prepared.entry is entry:
                self._unqueue(req)
                self._fail(req, ServeError(f"The model {served_id!r} was removed.", ErrorKind.NOT_FOUND, "model"))
        self._retired.append(entry)
        self._release_retired()
        return entry

    def _release_retired(self) -> None:
        if not self._retired:
            return
        in_use = {id(r.entry) for g in self._groups.values() for r in g.rows}
        in_use |= {id(p.entry) for g in self._groups.values() for _, p in g.joiners}
        for entry in [e for e in self._retired if id(e) not in in_use]:
            self._retired.remove(entry)
            self.pool.release(entry)

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "completion_tokens": self.completion_tokens,
            "inflight": len(self._live) + sum(len(g.joiners) for g in self._groups.values()),
            "rows_in_flight": sum(len(g.rows) for g in self._groups.values()),
            "waiting": len(self._waiting),
            "steps": self.steps,
            "mean_batch": round(self.rows_stepped / self.steps, 2) if self.steps else 0.0,
            "max_batch": self.max_batch,
            "max_queue": self.max_queue,
        }


def _too_long(limit: int, given: str, param: str) -> ServeError:
    return ServeError(
        f"This model's maximum context length is {limit} tokens; the prompt has {given}. Shorten the prompt.",
        ErrorKind.INVALID,
        param,
        "context_length_exceeded",
    )


__all__ = ["Scheduler"]
