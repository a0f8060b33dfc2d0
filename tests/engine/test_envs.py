"""Environment interface, registry and the built-in reverse-text environment (no torch)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from primenb.envs import (
    EnvironmentArgumentError,
    EnvironmentLookupError,
    builtin_ids,
    environment_args,
    get_environment,
    register_environment,
)
from primenb.envs.base import Environment
from primenb.envs.reverse_text import SYSTEM_PROMPT, lcs, parse_reversed


def test_builtin_ids_and_args() -> None:
    assert "reverse-text" in builtin_ids()
    args = environment_args("reverse-text")
    assert args["min_len"] == 5 and args["max_len"] == 10 and args["seed"] == 0


def test_unknown_id_suggests_the_closest() -> None:
    with pytest.raises(EnvironmentLookupError) as err:
        get_environment("reverse_txt")
    assert "Did you mean 'reverse-text'" in str(err.value)
    assert isinstance(err.value, KeyError)


def test_unknown_argument_lists_accepted_ones() -> None:
    with pytest.raises(EnvironmentArgumentError) as err:
        get_environment("reverse-text", min_length=3)
    assert "min_length" in str(err.value) and "min_len" in str(err.value)


def test_none_arguments_mean_default() -> None:
    env = get_environment("reverse-text", num_train=10, num_eval=5, seed=None)
    assert env.args["seed"] == 0


def test_reward_perfect_partial_and_missing_tags() -> None:
    env = get_environment("reverse-text", num_train=4, num_eval=2)
    row = env.train_rows()[0]
    ideal = env.ideal_completion(row)
    assert ideal == f"<reversed_text>{row['prompt'][::-1]}</reversed_text>"
    completions = [
        ideal,
        f"<reversed_text>  {row['answer']}\n</reversed_text>",  # whitespace is stripped
        row["answer"],  # right text, no tags -> scored as empty -> 0
        f"<reversed_text>{row['answer'][:3]}</reversed_text>",
        f"<reversed_text>{row['answer']}",  # no closing tag
    ]
    scores = lcs([row["prompt"]] * 5, completions, answer=[row["answer"]] * 5)
    assert scores[0] == 1.0 and scores[1] == 1.0
    assert scores[2] == 0.0 and scores[4] == 0.0
    assert 0.0 < scores[3] < 1.0
    assert env.score([row["prompt"]] * 2, completions[:2], [row, row]) == [1.0, 1.0]
    assert env.is_correct(ideal, row) and not env.is_correct(completions[3], row)


def test_chat_completions_are_scored_like_text() -> None:
    msgs = [{"role": "assistant", "content": "<reversed_text>cba</reversed_text>"}]
    assert lcs(["abc"], [msgs], answer=["cba"]) == [1.0]


def test_parse_reversed_takes_first_pair() -> None:
    assert parse_reversed("x <reversed_text> ab </reversed_text><reversed_text>z</reversed_text>") == "ab"
    assert parse_reversed("nothing here") == ""


def test_data_is_seeded_and_held_out() -> None:
    a = get_environment("reverse-text", num_train=300, num_eval=50, seed=3)
    b = get_environment("reverse-text", num_train=300, num_eval=50, seed=3)
    c = get_environment("reverse-text", num_train=300, num_eval=50, seed=4)
    assert a.train_rows() == b.train_rows() and a.eval_rows() == b.eval_rows()
    assert a.train_rows() != c.train_rows()
    held_out = {r["prompt"] for r in a.eval_rows()}
    assert len(held_out) == 50
    assert not held_out & {r["prompt"] for r in a.train_rows()}
    for row in a.train_rows():
        assert 5 <= len(row["prompt"]) <= 10 and row["answer"] == row["prompt"][::-1]


def test_lengths_and_bad_values() -> None:
    env = get_environment("reverse-text", min_len=2, max_len=3, num_train=50, num_eval=10)
    assert all(2 <= len(r["prompt"]) <= 3 for r in env.train_rows())
    with pytest.raises(EnvironmentArgumentError):
        get_environment("reverse-text", min_len=4, max_len=2)
    with pytest.raises(EnvironmentArgumentError):  # 2 strings exist, 2 can't be held out
        get_environment("reverse-text", min_len=1, max_len=1, alphabet="ab", num_eval=2)


def test_prompt_format_text_and_chat() -> None:
    env = get_environment("reverse-text", num_train=2, num_eval=1)
    assert env.format_prompt("hello", chat=False) == "hello="
    msgs = env.format_prompt("hello", chat=True)
    assert msgs == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "hello"},
    ]


def test_register_and_import_path_environments(monkeypatch) -> None:
    from primenb.envs import registry

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))  # no leak into later tests

    def make(n: int = 2) -> Environment:
        rows = [{"prompt": str(i), "answer": str(i)} for i in range(n)]
        return Environment(
            id="echo", train=rows, reward_funcs=[lambda prompts, completions, **kw: [1.0] * len(prompts)]
        )

    register_environment("test-echo", make, overwrite=True)
    assert len(get_environment("test-echo", n=3).train_rows()) == 3
    env = get_environment("primenb.envs.reverse_text:load_environment", num_train=3, num_eval=1)
    assert len(env.train_rows()) == 3
    with pytest.raises(EnvironmentLookupError):
        get_environment("primenb.envs.nope:load")


def test_envs_do_not_import_torch() -> None:
    code = (
        "import sys, primenb.envs as e; e.get_environment('reverse-text', num_train=5);"
        "import primenb.engine, primenb.engine.launch, primenb.engine.plan, primenb.protocol.rundir;"
        "bad = [m for m in ('torch', 'transformers', 'trl', 'peft') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
