"""Built-in ``arithmetic``: compute a short integer expression; exact-match reward.

A task of a different kind from ``reverse-text``: the reply is right or wrong (no partial
credit), the answer is short, and the model has to carry digits rather than copy characters.

Prompt format
    * model without a chat template (the embedded ``primenb/tiny-byte`` models): ``"37+45="``
    * model with a chat template: system message = ``SYSTEM_PROMPT``, user message = ``"37+45"``

Ideal completion: ``"82"``. Reward ``exact_match``: 1.0 when the reply, stripped of surrounding
whitespace, is exactly the answer (``"-7"`` for negative results), else 0.0.
"""

from __future__ import annotations

import random
from typing import Any

from primenb.envs.base import Environment, Row, completion_text
from primenb.envs.errors import MAX_ROWS, EnvironmentArgumentError, check_range

SYSTEM_PROMPT = "Compute the result of the expression. Reply with the integer only."
OPERATIONS = "+-*"


def parse_answer(text: str) -> str:
    """The reply with surrounding whitespace removed (the whole reply must be the number)."""
    return text.strip()


def exact_match(prompts: list[Any], completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """Reward: 1.0 when the reply is exactly the result (surrounding whitespace ignored), else 0.0."""
    return [
        1.0 if parse_answer(completion_text(c)) == str(a) else 0.0 for c, a in zip(completions, answer, strict=True)
    ]


class ArithmeticEnv(Environment):
    def ideal_completion(self, row: Row) -> str:
        return str(row["answer"])

    def is_correct(self, completion: Any, row: Row) -> bool:
        return parse_answer(completion_text(completion)) == str(row["answer"])


def _evaluate(terms: list[int], ops: list[str]) -> int:
    """The value with ``*`` binding tighter than ``+``/``-`` (as written in Python)."""
    products, signs = [terms[0]], [1]
    for op, term in zip(ops, terms[1:], strict=True):
        if op == "*":
            products[-1] *= term
        else:
            products.append(term)
            signs.append(1 if op == "+" else -1)
    return sum(sign * value for sign, value in zip(signs, products, strict=True))


def _expression(rng: random.Random, num_terms: int, lo: int, hi: int, ops: str) -> tuple[str, str]:
    terms = [rng.randint(lo, hi) for _ in range(num_terms)]
    chosen = [rng.choice(ops) for _ in range(num_terms - 1)]
    text = str(terms[0]) + "".join(f"{op}{t}" for op, t in zip(chosen, terms[1:], strict=True))
    return text, str(_evaluate(terms, chosen))


def load_environment(
    num_terms: int = 2,
    min_value: int = 0,
    max_value: int = 99,
    operations: str = "+",
    num_train: int = 20000,
    num_eval: int = 200,
    seed: int = 0,
    system_prompt: str = SYSTEM_PROMPT,
) -> ArithmeticEnv:
    """Build arithmetic with ``num_train`` training and ``num_eval`` distinct held-out expressions.

    Each expression has ``num_terms`` integers in ``min_value``..``max_value`` joined by operators
    drawn from ``operations`` (any of ``+-*``). The same ``seed`` gives the same rows; held-out
    expressions never appear in the training rows (training rows may repeat).
    """
    check_range("arithmetic", "num_train", num_train, 1, MAX_ROWS)
    check_range("arithmetic", "num_eval", num_eval, 0, MAX_ROWS)
    check_range("arithmetic", "max_value", max_value, 0, 10**12)
    if not (isinstance(num_terms, int) and 2 <= num_terms <= 64):
        raise EnvironmentArgumentError(f"arithmetic: num_terms must be an integer >= 2, got {num_terms!r}")
    if not (isinstance(min_value, int) and isinstance(max_value, int) and 0 <= min_value <= max_value):
        raise EnvironmentArgumentError(
            f"arithmetic: need 0 <= min_value <= max_value, got {min_value!r}, {max_value!r}"
        )
    ops = "".join(dict.fromkeys(operations))
    if not ops or set(ops) - set(OPERATIONS):
        raise EnvironmentArgumentError(f"arithmetic: operations must be made of {OPERATIONS!r}, got {operations!r}")
    if num_train < 1 or num_eval < 0:
        raise EnvironmentArgumentError(
            f"arithmetic: need num_train >= 1 and num_eval >= 0, got {num_train}, {num_eval}"
        )
    space = (max_value - min_value + 1) ** num_terms * len(ops) ** (num_terms - 1)
    if num_eval > space // 2:
        raise EnvironmentArgumentError(
            f"arithmetic: only {space} distinct expressions exist for these settings; "
            f"num_eval={num_eval} must be at most half of that"
        )
    rng = random.Random(seed)
    held_out: dict[str, str] = {}
    while len(held_out) < num_eval:
        text, answer = _expression(rng, num_terms, min_value, max_value, ops)
        held_out.setdefault(text, answer)
    train: list[Row] = []
    while len(train) < num_train:
        text, answer = _expression(rng, num_terms, min_value, max_value, ops)
        if text not in held_out:
            train.append({"prompt": text, "answer": answer})
    args = {
        "num_terms": num_terms,
        "min_value": min_value,
        "max_value": max_value,
        "operations": ops,
        "num_train": num_train,
        "num_eval": num_eval,
        "seed": seed,
        "system_prompt": system_prompt,
    }
    return ArithmeticEnv(
        id="arithmetic",
        train=train,
        eval=[{"prompt": t, "answer": a} for t, a in held_out.items()],
        reward_funcs=[exact_match],
        reward_weights=[1.0],
        system_prompt=system_prompt,
        text_template="{prompt}=",
        args=args,
        description="Compute a short integer expression (e.g. 37+45); exact-match reward.",
        version="1",
        parser=parse_answer,
    )


__all__ = ["SYSTEM_PROMPT", "ArithmeticEnv", "exact_match", "load_environment", "parse_answer"]
