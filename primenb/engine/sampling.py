"""Choosing each row's next token with the row's own settings and random generator.

A request samples from a ``torch.Generator`` seeded with its seed (row ``i`` of ``n`` with a seed
derived from it), so its text does not depend on which other requests share its decode steps:
the same seed gives the same text alone or in a batch of 32. Log-probabilities are those of the
model itself (the raw logits, before temperature, penalties and filters), as vLLM reports by
default.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from primenb.engine.serve_requests import Sampling, TokenLogprob

_MASK64 = (1 << 64) - 1


def row_generator(seed: int, index: int) -> torch.Generator:
    """The generator of row ``index`` of a request seeded ``seed`` (rows differ, each repeatable)."""
    mixed = (seed + index * 0x9E3779B97F4A7C15) & _MASK64  # golden-ratio step: rows far apart
    return torch.Generator().manual_seed(mixed)


@dataclass
class RowSampler:
    """The sampling state of one row: its settings, generator and the counts its penalties need.

    ``prompt_ids`` are the prompt's tokens (``repetition_penalty`` counts them as seen);
    ``stop_ids`` the tokens that would end the row (masked until ``min_tokens`` are generated).
    The order is vLLM's: logit bias and the ``min_tokens`` mask, then the penalties (repetition,
    frequency, presence), then temperature, ``min_p``, ``top_k`` and ``top_p``.
    """

    sampling: Sampling
    generator: torch.Generator
    counts: dict[int, int] = field(default_factory=dict)  # generated token -> times
    prompt_ids: torch.Tensor | None = None
    stop_ids: tuple[int, ...] = ()
    generated: int = 0
    _seen: torch.Tensor | None = None  # [vocab] bool: the prompt's and the completion's tokens

    def choose(self, logits: torch.Tensor, tokenizer: Any) -> tuple[int, TokenLogprob | None]:
        """The next token from one row of logits ``[vocab]``, and its log-probability entry when
        the request asked for them."""
        s = self.sampling
        raw = logits.float()
        scores = self._adjusted(raw)
        if s.greedy:
            token = int(torch.argmax(scores))
        else:
            scores = scores / s.temperature
            if s.min_p > 0:
                probs = torch.softmax(scores, dim=-1)
                scores = scores.masked_fill(probs < s.min_p * probs.max(), float("-inf"))
            if 0 < s.top_k < scores.numel():
                kth = torch.topk(scores, s.top_k).values[-1]
                scores = scores.masked_fill(scores < kth, float("-inf"))
            if s.top_p < 1.0:
                scores = _top_p(scores, s.top_p)
            probs = torch.softmax(scores, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=self.generator))
        self.counts[token] = self.counts.get(token, 0) + 1
        self.generated += 1
        if self._seen is not None:
            self._seen[token] = True
        if not s.logprobs:
            return token, None
        lp = torch.log_softmax(raw, dim=-1)
        return token, logprob_entry(lp, token, s.top_logprobs, tokenizer, as_ids=s.tokens_as_ids)

    def _adjusted(self, raw: torch.Tensor) -> torch.Tensor:
        s = self.sampling
        masking = self.generated < s.min_tokens and bool(self.stop_ids)
        repeating = s.repetition_penalty != 1.0
        penalising = bool(self.counts) and bool(s.presence_penalty or s.frequency_penalty)
        if not (s.logit_bias or masking or repeating or penalising):
            return raw
        scores = raw.clone()
        if s.logit_bias:
            ids = torch.tensor([i for i in s.logit_bias if 0 <= i < scores.numel()], dtype=torch.long)
            if ids.numel():
                scores[ids] += torch.tensor([s.logit_bias[int(i)] for i in ids], dtype=scores.dtype)
        if masking:
            scores[torch.tensor(self.stop_ids, dtype=torch.long)] = float("-inf")
        if repeating:
            seen = self._seen_mask(scores.numel())
            p = s.repetition_penalty
            scores = torch.where(seen, torch.where(scores > 0, scores / p, scores * p), scores)
        if penalising:
            ids = torch.tensor(list(self.counts), dtype=torch.long)
            counts = torch.tensor(list(self.counts.values()), dtype=scores.dtype)
            # OpenAI's definition: frequency scales with the count, presence is paid once
            scores[ids] -= counts * s.frequency_penalty + s.presence_penalty
        return scores

    def _seen_mask(self, vocab: int) -> torch.Tensor:
        """Which tokens the repetition penalty applies to; built once, then one token per step."""
        if self._seen is None:
            self._seen = torch.zeros(vocab, dtype=torch.bool)
            if self.prompt_ids is not None:
                self._seen[self.prompt_ids[self.prompt_ids < vocab]] = True
            for token in self.counts:
                self._seen[token] = True
        return self._seen


def _top_p(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    ordered, order = torch.sort(scores, descending=True)
    probs = torch.softmax(ordered, dim=-1)
    before = torch.cumsum(probs, dim=-1) - probs  # mass of the tokens ranked above each one
    drop = before >= top_p
    drop[0] = False  # the most likely token always stays
    return scores.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))


def token_text(tokenizer: Any, token: int, *, as_ids: bool = False) -> str:
    """A token as logprob entries name it: its text, or ``token_id:N`` (vLLM's
    ``return_tokens_as_token_ids``, what a client that trains on token ids reads)."""
    return f"token_id:{token}" if as_ids else str(tokenizer.decode([token], skip_special_tokens=False))


def logprob_entry(
    logprobs: torch.Tensor, token: int, top: int, tokenizer: Any, *, as_ids: bool = False
) -> TokenLogprob:
    entry = TokenLogprob(token_text(tokenizer, token, as_ids=as_ids), float(logprobs[token]))
    if top > 0:
        values, ids = torch.topk(logprobs, min(top, logprobs.numel()))
        entry.top = [(token_text(tokenizer, int(i), as_ids=as_ids), float(v)) for v, i in zip(values, ids, strict=True)]
    return entry


__all__ = ["RowSampler", "logprob_entry", "row_generator", "token_text"]
