"""Built-in ``reverse-text``: reverse a short string, answer inside ``<reversed_text>`` tags.

Follows the upstream verifiers environment (system prompt, tag, longest-common-subsequence style
reward via ``difflib.SequenceMatcher``) but generates its strings locally from a seed instead of
downloading ``PrimeIntellect/Reverse-Text-RL``, and keeps prompts short so a tiny byte-level model
learns it on a CPU in minutes.

Prompt format
    * model without a chat template (the embedded ``primenb/tiny-byte`` models): ``"hello="``
    * model with a chat template: system message = ``SYSTEM_PROMPT``, user message = ``"hello"``

Ideal completion: ``"<reversed_text>olleh</reversed_text>"``.
Reward ``lcs``: ``SequenceMatcher(None, tagged_text.strip(), answer).ratio()``; a reply with no
complete tag pair scores the empty string (0.0).
"""

from __future__ import annotations

import difflib
import random
import re
import string
from typing import Any

from primenb.envs.base import Environment, Row, completion_text
from primenb.envs.errors import MAX_ROWS, EnvironmentArgumentError, check_range

SYSTEM_PROMPT = "Reverse the text character-by-character. Put your answer in <reversed_text> tags."
TAG = "reversed_text"
_TAG_RE = re.compile(rf"<{TAG}>(.*?)</{TAG}>", re.DOTALL)


def parse_reversed(text: str) -> str:
    """The text inside the first ``<reversed_text>...</reversed_text>`` pair, stripped; else ''."""
    match = _TAG_RE.search(text)
    return match.group(1).strip() if match else ""


def lcs_ratio(response: str, answer: str) -> float:
    return difflib.SequenceMatcher(None, response, answer).ratio()


def lcs(prompts: list[Any], completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """Reward: similarity of the tagged reply to the reversed text (1.0 = exact)."""
    return [lcs_ratio(parse_reversed(completion_text(c)), str(a)) for c, a in zip(completions, answer, strict=True)]


class ReverseTextEnv(Environment):
    def ideal_completion(self, row: Row) -> str:
        return f"<{TAG}>{row['answer']}</{TAG}>"

    def is_correct(self, completion: Any, row: Row) -> bool:
        return parse_reversed(completion_text(completion)) == row["answer"]


def _random_strings(
    rng: random.Random, n: int, min_len: int, max_len: int, alphabet: str, exclude: set[str]
) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))
        if s not in exclude:
            out.append(s)
    return out


def load_environment(
    min_len: int = 5,
    max_len: int = 10,
    num_train: int = 20000,
    num_eval: int = 200,
    seed: int = 0,
    alphabet: str = string.ascii_lowercase,
    system_prompt: str = SYSTEM_PROMPT,
) -> ReverseTextEnv:
    """Build reverse-text with ``num_train`` training and ``num_eval`` distinct held-out strings.

    Strings have ``min_len``..``max_len`` characters from ``alphabet``. The same ``seed`` gives the
    same rows; held-out strings never appear in the training rows.
    """
    check_range("reverse-text", "num_train", num_train, 1, MAX_ROWS)
    check_range("reverse-text", "num_eval", num_eval, 0, MAX_ROWS)
    check_range("reverse-text", "max_len", max_len, 1, 4096)
    if not (isinstance(min_len, int) and isinstance(max_len, int) and 1 <= min_len <= max_len):
        raise EnvironmentArgumentError(
            f"reverse-text: need 1 <= min_len <= max_len, got min_len={min_len}, max_len={max_len}"
        )
    if num_train < 1 or num_eval < 0:
        raise EnvironmentArgumentError(
            f"reverse-text: need num_train >= 1 and num_eval >= 0, got {num_train}, {num_eval}"
        )
    alphabet = "".join(dict.fromkeys(alphabet))
    if not alphabet:
        raise EnvironmentArgumentError("reverse-text: alphabet is empty")
    space = sum(len(alphabet) ** n for n in range(min_len, max_len + 1))
    if num_eval > space // 2:
        raise EnvironmentArgumentError(
            f"reverse-text: only {space} distinct strings exist for these lengths; "
            f"num_eval={num_eval} must be at most half of that"
        )
    rng = random.Random(seed)
    eval_strings: list[str] = []
    seen: set[str] = set()
    while len(eval_strings) < num_eval:
        (s,) = _random_strings(rng, 1, min_len, max_len, alphabet, seen)
        seen.add(s)
        eval_strings.append(s)
    train_strings = _random_strings(rng, num_train, min_len, max_len, alphabet, seen)

    def rows(strings: list[str]) -> list[Row]:
        return [{"prompt": s, "answer": s[::-1]} for s in strings]

    return ReverseTextEnv(
        id="reverse-text",
        train=rows(train_strings),
        eval=rows(eval_strings),
        reward_funcs=[lcs],
        reward_weights=[1.0],
        system_prompt=system_prompt,
        text_template="{prompt}=",
        description="Reverse a short string character by character, answer in <reversed_text> "
        "tags; reward: similarity to the reversed text.",
        version="1",
        args={
            "min_len": min_len,
            "max_len": max_len,
            "num_train": num_train,
            "num_eval": num_eval,
            "seed": seed,
            "alphabet": alphabet,
            "system_prompt": system_prompt,
        },
    )


__all__ = ["SYSTEM_PROMPT", "ReverseTextEnv", "lcs", "load_environment", "parse_reversed"]
