"""What the HTTP layer hands the scheduler, and what comes back: one generation request with its
sampling parameters, and the events it emits while its rows decode. No torch here, so the
Starlette app (`primenb.serve.app`) builds and reads these without importing the ML stack.

The scheduler thread emits; the event loop consumes. ``emit_all`` is the only bridge between them
(the app sets it to one ``call_soon_threadsafe`` per step into an ``asyncio.Queue``), and ``cancel``
the only way back (a flag the scheduler reads before every decode step).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from primenb.engine.chat import Conversation
from primenb.engine.serve_errors import ServeError

# Below this a temperature means greedy decoding (dividing logits by 1e-300 overflows to inf/nan).
GREEDY_BELOW = 1e-5
Prompt = str | Conversation | list[int]
SEED_MIN, SEED_MAX = -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Sampling:
    """Per-request decoding settings, validated by the HTTP layer before they get here."""

    max_tokens: int | None  # None: up to the context left
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict[int, float] = field(default_factory=dict)
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    logprobs: bool = False
    top_logprobs: int = 0
    echo: bool = False  # /v1/completions: the prompt goes in front of the text (with logprobs: its own)
    ignore_eos: bool = False  # vLLM's: decode max_tokens whatever the model says (benchmarks)
    # vLLM's sampling extras
    min_p: float = 0.0  # drop tokens less likely than min_p times the most likely one (after temperature)
    repetition_penalty: float = 1.0  # HF/vLLM: tokens of the prompt or the completion, logit / p (> 0) or * p
    min_tokens: int = 0  # the end of text and stop_token_ids cannot be sampled before this many tokens
    stop_token_ids: tuple[int, ...] = ()  # tokens that end a row as the end of text does
    skip_special_tokens: bool = True  # the text leaves special tokens out
    include_stop_str_in_output: bool = False  # the stop string (or stop token's text) ends the text
    tokens_as_ids: bool = False  # logprob entries name tokens "token_id:N" (vLLM's return_tokens_as_token_ids)

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW


# What a request that sets nothing gets: the HTTP schemas take their defaults from here, not again.
DEFAULT_SAMPLING = Sampling(max_tokens=None)


@dataclass
class TokenLogprob:
    """One generated (or, with ``echo``, prompt) token: its text, its log-probability under the model
    (``None`` for the first prompt token, which nothing predicts) and the most likely alternatives."""

    token: str
    logprob: float | None
    top: list[tuple[str, float]] = field(default_factory=list)


# -- events (scheduler thread -> event loop) -------------------------------------------------------


@dataclass
class Admitted:
    """Tokenised and queued for a slot; the prompt fits. A streamed response starts here."""

    prompt_tokens: int
    seed: int  # the seed the request samples with (its own, or a fresh one): reproducible later


@dataclass
class Delta:
    """New text of row ``index``; ``token_ids`` are the tokens it came from (one per decode step, none
    for text a stop string held back until the end), ``logprobs`` theirs when asked for."""

    index: int
    text: str
    logprobs: list[TokenLogprob] | None = None
    token_ids: list[int] = field(default_factory=list)


@dataclass
class Finished:
    """Row ``index`` ended. A row ended by a stop token (the end of text, a ``stop_token_ids`` entry)
    names it in ``stop_token`` (with its log-probability when asked for): it is not part of the text
    nor of ``completion_tokens``, and the token route returns it as the completion's last token."""

    index: int
    reason: str  # "stop" | "length" | "abort"
    completion_tokens: int
    stop_token: int | None = None
    stop_logprob: TokenLogprob | None = None


@dataclass
class Failed:
    error: ServeError


@dataclass
class Done:
    prompt_tokens: int
    completion_tokens: int


Event = Admitted | Delta | Finished | Failed | Done


class GenRequest:
    """One request: ``n`` rows of one prompt on one served model. ``prompt`` is a string, a chat
    `Conversation` (both rendered and tokenised on the scheduler's thread) or token ids; ``param``
    names the request field the prompt came from in errors (default ``prompt`` / ``messages``)."""

    def __init__(self, model: str, prompt: Prompt, sampling: Sampling, *, param: str | None = None) -> None:
        self.model = model
        self.prompt = prompt
        self.sampling = sampling
        self.param = param
        # without a seed every request draws a fresh one: two seedless requests never share a sample
        self.seed = sampling.seed if sampling.seed is not None else secrets.randbits(63)
        self.created = time.monotonic()
        self.emit: Callable[[Event], None] = lambda _event: None
        # what the scheduler calls, once per step with that step's events: the HTTP layer sets it
        # to one hop onto its event loop (a hop per token per row would cost a wake-up each)
        self.emit_all: Callable[[list[Event]], None] = self._one_by_one
        self._cancelled = threading.Event()

    def _one_by_one(self, events: list[Event]) -> None:
        for event in events:
            self.emit(event)

    def cancel(self) -> None:
        """The client went away: the scheduler drops this request's rows before its next step."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()


__all__ = [
    "GREEDY_BELOW",
    "SEED_MAX",
    "SEED_MIN",
    "Admitted",
    "Delta",
    "Done",
    "Event",
    "Failed",
    "Finished",
    "GenRequest",
    "Sampling",
    "TokenLogprob",
]
