"""vLLM's sampling extras on hand-made logits and texts: the arithmetic each one is defined by, where a
served model's random logits could hide it (a penalty on a negative logit, min_p's relative cut)."""

from __future__ import annotations

import math

import torch

from primenb.engine.detok import TextStream
from primenb.engine.models import build_byte_tokenizer
from primenb.engine.sampling import RowSampler
from primenb.engine.serve_requests import Sampling

TOK = build_byte_tokenizer()


def sampler(prompt: list[int] | None = None, stop_ids: tuple[int, ...] = (), **kw: object) -> RowSampler:
    kw.setdefault("max_tokens", 8)
    s = Sampling(**kw)  # type: ignore[arg-type]
    ids = torch.tensor(prompt, dtype=torch.long) if prompt is not None else None
    return RowSampler(s, torch.Generator().manual_seed(0), prompt_ids=ids, stop_ids=stop_ids)


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits_of_seen_tokens() -> None:
    """HF's and vLLM's rule, over the prompt's tokens and the generated ones alike."""
    row = sampler(prompt=[0], temperature=0, repetition_penalty=2.0)
    row.counts = {1: 1}  # token 1 was generated once
    logits = torch.tensor([2.0, -1.0, 1.5, 0.5])
    assert row._adjusted(logits).tolist() == [1.0, -2.0, 1.5, 0.5]
    assert row.choose(logits, TOK)[0] == 2  # token 0 fell below token 2
    assert sampler(prompt=[0], temperature=0).choose(logits, TOK)[0] == 0  # no penalty: the argmax


def test_min_tokens_masks_the_stop_tokens_until_then() -> None:
    row = sampler(temperature=0, min_tokens=2, stop_ids=(1,))
    logits = torch.tensor([0.0, 9.0, 1.0])
    assert [row.choose(logits, TOK)[0] for _ in range(3)] == [2, 2, 1]


def test_min_p_drops_tokens_below_its_share_of_the_top_probability() -> None:
    logits = torch.log(torch.tensor([0.5, 0.3, 0.2]))
    cut = sampler(temperature=1.0, min_p=0.5)  # keeps p >= 0.25: tokens 0 and 1
    drawn = {cut.choose(logits, TOK)[0] for _ in range(300)}
    assert drawn == {0, 1}
    plain = sampler(temperature=1.0)
    assert {plain.choose(logits, TOK)[0] for _ in range(300)} == {0, 1, 2}


def test_logprobs_stay_the_model_s_own_whatever_the_extras() -> None:
    logits = torch.tensor([2.0, -1.0, 1.5, 0.5])
    row = sampler(prompt=[0], temperature=0, repetition_penalty=3.0, logprobs=True, tokens_as_ids=True)
    token, entry = row.choose(logits, TOK)
    assert entry is not None and entry.token == f"token_id:{token}"
    assert math.isclose(entry.logprob or 0.0, float(torch.log_softmax(logits, -1)[token]), abs_tol=1e-6)


def ids(text: str) -> list[int]:
    return [int(i) for i in TOK(text)["input_ids"]]


def stream(text: str, **kw: object) -> str:
    s = TextStream(TOK, **kw)  # type: ignore[arg-type]
    return "".join(s.push(t) for t in ids(text)) + s.close()


def test_stop_strings_with_include_stop_and_min_tokens() -> None:
    assert stream("abcabc", stop=("ca",)) == "ab"
    assert stream("abcabc", stop=("ca",), include_stop=True) == "abca"
    assert stream("abcabc", stop=("bc",), min_tokens=3) == "abca"  # the first "bc" came before 3 tokens
    assert stream("abcabc", stop=("b",), min_tokens=5) == "abcabc"


def test_skip_special_tokens() -> None:
    s = TextStream(TOK, skip_special_tokens=False)
    assert s.push(2) + s.push(ids("a")[0]) + s.close() == "<bos>a"
    s = TextStream(TOK)
    assert s.push(2) + s.push(ids("a")[0]) + s.close() == "a"
