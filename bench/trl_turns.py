"""The baseline for bench_engine.py's multi-turn half: a primenb ``reverse-turns`` episode run's
training through TRL's own multi-turn loop, ``GRPOTrainer(environment_factory=...)``.

Same model (built from config, same seed), same tasks (the run's own, in order), same TRL arguments
(read from the run's configs/trainer_args.json), same reward (the taskset's per-turn similarity).
Writes [time, step, num_tokens] of every TRL log call, and the mean model turns per rollout, to OUT.

    python bench/trl_turns.py RUN_DIR OUT

TRL's loop cannot say what reverse-turns says: it continues a rollout only when the model's reply
parses as a tool call, and what comes back is a ``tool`` message, never a user turn. So here the
feedback and next word are the result of the environment's one tool, ``answer(reply)``, and every
reply is read as a call to it (TRL's ``parse_response`` is replaced in this script), capped at
``turns - 1`` calls: each rollout plays every turn, as the verifiers Env makes it, whatever the
untrained model writes. What stays different: TRL renders the tool's schema into every prompt and
the feedback as a tool turn, where verifiers' Env sends a user turn.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

TOOL = "answer"


def every_reply_answers(tokenizer: Any, ids: list[int], prefix: Any = None, tools: Any = None) -> dict[str, Any]:
    """TRL's reply parser for this bench: the reply's text, as a call of the environment's tool."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    call = {"type": "function", "function": {"name": TOOL, "arguments": {"reply": text}}}
    return {"role": "assistant", "content": text, "tool_calls": [call]}


def main(run_dir: str, out: str) -> None:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer import grpo_trainer

    from primenb.engine.data import build_sources
    from primenb.engine.models import build_byte_tokenizer, build_tiny_model
    from primenb.engine.plan import build_plan
    from primenb.envs.verifiers_adapter import builtin_tasksets_on_path

    builtin_tasksets_on_path()
    from reverse_turns import score, user_turn  # type: ignore[import-not-found]

    plan = build_plan(json.loads((Path(run_dir) / "configs" / "resolved.json").read_text()))
    saved = json.loads((Path(run_dir) / "configs" / "trainer_args.json").read_text())
    tasks = build_sources(plan.sources)[0].env.tasks  # type: ignore[attr-defined]
    words_per_task = [list(t.data.info["words"]) for t in tasks]
    turns = max(len(w) for w in words_per_task)
    times: list[tuple[float, int, float]] = []
    played: list[int] = []  # model turns per finished rollout

    class ReverseTurns:
        """One rollout's conversation: which word the model answers next."""

        def reset(self, words: list[str], **_: Any) -> None:
            if getattr(self, "words", None):
                played.append(self.turn + 1)
            self.words, self.turn = list(words), 0

        def answer(self, reply: str) -> str:
            """Give the reversed word; returns whether it was right and the next word to reverse.

            Args:
                reply: The word, reversed.
            """
            self.turn += 1
            if self.turn >= len(self.words):
                return "Done."
            previous = self.words[self.turn - 1]
            return user_turn(self.turn, self.words[self.turn], previous, reply)

    def reversed_words(completions: list[Any], words: list[list[str]], **_: Any) -> list[float]:
        out = []
        for messages, ws in zip(completions, words, strict=True):
            replies = [m.get("content") or "" for m in messages if m.get("role") == "assistant"]
            out.append(sum(score(replies[t] if t < len(replies) else "", w) for t, w in enumerate(ws)) / len(ws))
        return out

    class Times(TrainerCallback):
        def on_log(self, a, state, control, logs=None, **kw):  # type: ignore[no-untyped-def]
            times.append((time.time(), state.global_step, float((logs or {}).get("num_tokens", 0))))

    grpo_trainer.parse_response = every_reply_answers
    tokenizer = build_byte_tokenizer()
    tokenizer.response_template = {"bench": "every reply is a call of answer()"}  # parsed above, never read
    opening = [[{"role": "user", "content": user_turn(0, w[0], None, None)}] for w in words_per_task]
    rows = [{"prompt": p, "words": w} for p, w in zip(opening, words_per_task, strict=True)]
    args = {**saved["args"], "run_name": "trl-turns", "max_tool_calling_iterations": turns - 1}
    # a turn's reply is capped as the episode caps it; the rollout's budget (replies and the
    # feedback between them) is the episode's seq_len, as primenb cuts an episode
    args["generation_kwargs"] = {"max_new_tokens": saved["args"]["max_completion_length"]}
    args["max_completion_length"] = plan.seq_len
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    trainer = GRPOTrainer(
        model=build_tiny_model(plan.model_name, seed=plan.seed),
        processing_class=tokenizer,
        reward_funcs=[reversed_words],
        train_dataset=Dataset.from_list(rows),
        args=GRPOConfig(output_dir=str(Path(out).parent / "trl-turns-trainer"), **args),
        environment_factory=ReverseTurns,
        callbacks=[Times()],
    )
    trainer.train()
    Path(out).write_text(json.dumps({"logs": times, "turns": played}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
