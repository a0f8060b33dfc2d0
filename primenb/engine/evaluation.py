"""Greedy generation on environment prompts: evaluation metrics and SFT samples."""

from __future__ import annotations

import logging
from typing import Any

import torch

from primenb.engine.chat import chat_text
from primenb.engine.data import Source
from primenb.envs import prompt_text

log = logging.getLogger("primenb.engine")


def render_prompts(tokenizer: Any, prompts: list[Any]) -> tuple[list[str], bool]:
    """Prompt strings for generation, and whether special tokens are already in them."""
    if prompts and not isinstance(prompts[0], str):
        texts = [chat_text(tokenizer, p) for p in prompts]
        return texts, True
    return list(prompts), False


@torch.no_grad()
def greedy_generate(
    model: Any, tokenizer: Any, prompts: list[Any], max_new_tokens: int, batch_size: int = 64
) -> list[str]:
    """Greedy completions (special tokens removed) for text or chat-message prompts."""
    texts, templated = render_prompts(tokenizer, prompts)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    out: list[str] = []
    try:
        for start in range(0, len(texts), batch_size):
            chunk = texts[start : start + batch_size]
            enc = tokenizer(
                chunk,
                return_tensors="pt",
                padding=True,
                padding_side="left",
                add_special_tokens=not templated,
            ).to(device)
            gen = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            new = gen[:, enc["input_ids"].shape[1] :]
            out.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    finally:
        if was_training:
            model.train()
    return out


class Evaluator:
    """Scores greedy completions on each source's eval rows."""

    def __init__(
        self,
        sources: list[Source],
        tokenizer: Any,
        *,
        chat: bool,
        num_examples: int,
        max_new_tokens: int,
    ) -> None:
        self.sources = sources
        self.tokenizer = tokenizer
        self.chat = chat
        self.num_examples = num_examples
        self.max_new_tokens = max_new_tokens

    def rows(self, src: Source, limit: int | None = None) -> list[dict[str, Any]]:
        rows = src.env.eval_rows()
        n = self.num_examples if limit is None else limit
        return rows if n is None or n < 0 else rows[:n]

    def run(self, model: Any, limit: int | None = None) -> tuple[dict[str, float], list[dict[str, Any]]]:
        """``({"eval/<name>/reward": ..., "eval/<name>/exact_match": ...}, sample rows)``."""
        metrics: dict[str, float] = {}
        samples: list[dict[str, Any]] = []
        for src in self.sources:
            rows = self.rows(src, limit)
            if not rows:
                continue
            prompts = [src.env.format_prompt(r["prompt"], chat=self.chat) for r in rows]
            texts = greedy_generate(model, self.tokenizer, prompts, self.max_new_tokens)
            completions: list[Any] = [[{"role": "assistant", "content": t}] for t in texts] if self.chat else texts
            rewards = src.env.score(prompts, completions, rows)
            correct = [src.env.is_correct(c, r) for c, r in zip(completions, rows, strict=True)]
            metrics[f"eval/{src.name}/reward"] = sum(rewards) / len(rewards)
            if all(c is not None for c in correct):
                metrics[f"eval/{src.name}/exact_match"] = sum(map(bool, correct)) / len(correct)
            metrics[f"eval/{src.name}/num_examples"] = len(rows)
            for p, t, r, row, ok in zip(prompts, texts, rewards, rows, correct, strict=True):
                samples.append(
                    {
                        "task": src.name,
                        "prompt": prompt_text(p),
                        "completion": t,
                        "reward": r,
                        "answer": row.get("answer"),
                        "correct": ok,
                    }
                )
        return metrics, samples


__all__ = ["Evaluator", "greedy_generate", "render_prompts"]
