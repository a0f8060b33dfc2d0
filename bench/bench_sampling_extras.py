"""What vLLM's sampling extras cost per sampled token, on the CPU where the scheduler samples: one row's
`RowSampler.choose` with plain sampling (temperature, top_p) against the same with ``min_p``,
``repetition_penalty`` over a 2,000-token prompt and ``min_tokens`` masking, for the embedded
model's vocabulary and a Qwen-sized one. Prints microseconds per token and the ratio.

    python bench/bench_sampling_extras.py
"""

from __future__ import annotations

import time

import torch

from primenb.engine.models import build_byte_tokenizer
from primenb.engine.sampling import RowSampler
from primenb.engine.serve_requests import Sampling

STEPS = 400


def per_token_us(vocab: int, extras: bool) -> float:
    torch.manual_seed(0)
    logits = torch.randn(STEPS, vocab)
    prompt = torch.randint(0, vocab, (2000,))
    kw = {"min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": STEPS // 2} if extras else {}
    s = Sampling(max_tokens=STEPS, temperature=1.0, top_p=0.9, **kw)  # type: ignore[arg-type]
    row = RowSampler(
        s, torch.Generator().manual_seed(0), prompt_ids=prompt if extras else None, stop_ids=(1,) if extras else ()
    )
    tok = build_byte_tokenizer()
    t0 = time.perf_counter()
    for i in range(STEPS):
        row.choose(logits[i], tok)
    return (time.perf_counter() - t0) / STEPS * 1e6


def main() -> None:
    torch.set_num_threads(1)
    for vocab in (260, 151_936):
        base, extra = per_token_us(vocab, False), per_token_us(vocab, True)
        print(
            f"vocab {vocab:>7}: plain {base:8.1f} us/token, with extras {extra:8.1f} us/token, ratio {extra / base:.2f}"
        )


if __name__ == "__main__":
    main()
