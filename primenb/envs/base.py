"""The environment interface the engine trains against.

An environment is data plus a way to score completions:

* train rows (and optional eval rows): dicts with ``prompt`` (text, or a list of chat messages),
  ``answer`` (str) and optional ``info`` (dict);
* reward functions in TRL's signature ``f(prompts, completions, **columns) -> list[float]``
  (``columns`` carries ``answer``, ``info`` and the other row fields), each with a weight;
* a system prompt, used when the model has a chat template;
* optionally an ideal completion per row (lets SFT train on the environment), an exact-match
  test (reported by evaluation) and a parser (text of a completion -> the answer it gives, used
  for exact match when the environment defines no test of its own).

``docs/environments.md`` describes the interface for user environments.

This module imports no torch; the notebook side imports it to validate ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Row = dict[str, Any]
Messages = list[dict[str, Any]]
RewardFunc = Callable[..., list[float]]


def completion_text(completion: Any) -> str:
    """The text of one completion, whether TRL passes a string or chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, Sequence):
        parts = [
            completion_text(m)
            for m in completion
            if not isinstance(m, dict) or m.get("role", "assistant") == "assistant"
        ]
        return "".join(parts)
    return "" if completion is None else str(completion)


def prompt_text(prompt: Any) -> str:
    """A readable one-string form of a prompt (text as is, messages as ``role: content`` lines)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        return "\n".join(
            f"{m.get('role', 'user')}: {m.get('content', '')}" if isinstance(m, dict) else str(m) for m in prompt
        )
    return str(prompt)


@dataclass
class Environment:
    """A single-turn task: rows to prompt with and reward functions to score the replies.

    Subclass it, or build one directly with ``Environment(id=..., train=[...], reward_funcs=[...])``.

    ``text_template`` turns a string prompt into what a model *without* a chat template sees; it
    may use ``{prompt}`` and ``{system_prompt}``. With a chat template the model sees the system
    prompt as a system message and the prompt as the user message.
    """

    id: str
    train: list[Row] = field(default_factory=list)
    eval: list[Row] = field(default_factory=list)
    reward_funcs: list[RewardFunc] = field(default_factory=list)
    reward_weights: list[float] | None = None
    system_prompt: str | None = None
    text_template: str = "{prompt}"
    args: dict[str, Any] = field(default_factory=dict)
    description: str = ""
    version: str = ""
    parser: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        if self.reward_weights is None:
            self.reward_weights = [1.0] * len(self.reward_funcs)
        if len(self.reward_weights) != len(self.reward_funcs):
            raise ValueError(
                f"environment {self.id!r}: {len(self.reward_funcs)} reward functions but "
                f"{len(self.reward_weights)} weights"
            )

    # -- data -----------------------------------------------------------------------------------
    def train_rows(self) -> list[Row]:
        return self.train

    def eval_rows(self) -> list[Row]:
        """Held-out rows; environments without their own fall back to the train rows."""
        return self.eval or self.train_rows()

    def format_prompt(self, prompt: Any, *, chat: bool) -> str | Messages:
        """What the model is given for one row's ``prompt``.

        ``chat=True``: a message list (system prompt first when the environment has one).
        ``chat=False``: one string, from ``text_template``.
        """
        if chat:
            if isinstance(prompt, str):
                messages: Messages = [{"role": "user", "content": prompt}]
            else:
                messages = [dict(m) for m in prompt]
            if self.system_prompt and not any(m.get("role") == "system" for m in messages):
                messages.insert(0, {"role": "system", "content": self.system_prompt})
            return messages
        text = prompt if isinstance(prompt, str) else prompt_text(prompt)
        return self.text_template.format(prompt=text, system_prompt=self.system_prompt or "")

    def ideal_completion(self, row: Row) -> str | None:
        """The reply that earns full reward, if the environment knows one (used for SFT)."""
        return None

    # -- scoring --------------------------------------------------------------------------------
    def score(self, prompts: list[Any], completions: list[Any], rows: list[Row]) -> list[float]:
        """Weighted sum of all reward functions for each completion."""
        from primenb.envs.guard import weighted_total

        columns = {key: [row.get(key) for row in rows] for key in _row_keys(rows)}
        terms: list[list[tuple[float, float]]] = [[] for _ in completions]
        for func, weight in zip(self.reward_funcs, self.reward_weights or [], strict=True):
            values = func(prompts=prompts, completions=completions, **columns)
            for i, value in enumerate(values):
                terms[i].append((weight, float(value if value is not None else 0.0)))
        return [weighted_total(t, self.id) for t in terms]  # finite: +-MAX_TERM per term

    def is_correct(self, completion: Any, row: Row) -> bool | None:
        """Exact-match test for evaluation: with a ``parser``, whether the parsed answer equals
        the row's answer; None when the environment has neither a test nor a parser."""
        if self.parser is None:
            return None
        parsed = self.parser(completion_text(completion))
        return parsed is not None and str(parsed).strip() == str(row.get("answer", "")).strip()

    def reward_names(self) -> list[str]:
        return [getattr(f, "__name__", "reward") for f in self.reward_funcs]


def _row_keys(rows: list[Row]) -> list[str]:
    keys: dict[str, None] = {}
    for row in rows:
        for key in row:
            if key != "prompt":
                keys[key] = None
    return list(keys)


__all__ = ["Environment", "RewardFunc", "Row", "completion_text", "prompt_text"]
