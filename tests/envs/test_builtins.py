"""Built-in environments (arithmetic), the interface for plain objects, and data hashes."""

from __future__ import annotations

import pytest

from primenb.envs import (
    EnvironmentArgumentError,
    EnvironmentLoadError,
    builtin_ids,
    get_environment,
)
from primenb.envs.arithmetic import SYSTEM_PROMPT, exact_match
from primenb.envs.fingerprint import data_fingerprint
from primenb.envs.interface import as_environment


def test_builtins_are_listed():
    assert builtin_ids() == ["arithmetic", "reverse-text"]


def test_arithmetic_is_seeded_held_out_and_right():
    a = get_environment("arithmetic", num_train=500, num_eval=50, seed=1, operations="+-*", num_terms=3)
    b = get_environment("arithmetic", num_train=500, num_eval=50, seed=1, operations="+-*", num_terms=3)
    c = get_environment("arithmetic", num_train=500, num_eval=50, seed=2, operations="+-*", num_terms=3)
    assert a.train_rows() == b.train_rows() and a.eval_rows() == b.eval_rows()
    assert a.train_rows() != c.train_rows()
    held_out = [r["prompt"] for r in a.eval_rows()]
    assert len(set(held_out)) == 50 and not set(held_out) & {r["prompt"] for r in a.train_rows()}
    for row in a.train_rows() + a.eval_rows():
        assert int(row["answer"]) == eval(row["prompt"])
        assert row["prompt"].count("+") + row["prompt"].count("-") + row["prompt"].count("*") == 2
    assert any("*" in r["prompt"] for r in a.train_rows())


def test_arithmetic_reward_prompt_and_ideal():
    env = get_environment("arithmetic", num_train=3, num_eval=2)
    row = env.train_rows()[0]
    assert env.format_prompt(row["prompt"], chat=False) == row["prompt"] + "="
    assert env.format_prompt("1+2", chat=True) == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "1+2"},
    ]
    assert env.ideal_completion(row) == row["answer"]
    assert exact_match(
        ["1+2"] * 4, ["3", " 3\n", "3 apples", [{"role": "assistant", "content": "3"}]], answer=["3"] * 4
    ) == [1.0, 1.0, 0.0, 1.0]
    assert env.is_correct(" 3 ", {"answer": "3"}) and not env.is_correct("4", {"answer": "3"})


def test_arithmetic_bad_arguments():
    with pytest.raises(EnvironmentArgumentError, match="operations must be made of"):
        get_environment("arithmetic", operations="/")
    with pytest.raises(EnvironmentArgumentError, match="at most half"):
        get_environment("arithmetic", min_value=0, max_value=1, num_eval=5)


def test_plain_objects_become_environments():
    def score(prompts, completions, **kw):
        return [1.0] * len(completions)

    env = as_environment(
        {
            "dataset": [
                {"question": "hi", "answer": 3, "source": "web"},
                {"prompt": [{"role": "user", "content": "yo"}], "info": '{"k": 1}'},
            ],
            "reward_funcs": [(score, 0.5)],
            "parser": type("P", (), {"parse_answer": staticmethod(lambda t: t.strip())})(),
        },
        "plain",
    )
    assert env.train_rows() == [
        {"prompt": "hi", "answer": "3", "info": {"source": "web"}},
        {"prompt": [{"role": "user", "content": "yo"}], "answer": "", "info": {"k": 1}},
    ]
    assert env.reward_weights == [0.5] and env.eval_rows() == env.train_rows()
    assert env.is_correct(" 3", {"answer": "3"}) is True
    assert env.ideal_completion(env.train_rows()[0]) is None
    with pytest.raises(EnvironmentLoadError, match="'plain': 1 reward functions but 2 weights"):
        as_environment({"dataset": [{"prompt": "a"}], "reward_funcs": [score], "reward_weights": [1, 2]}, "plain")
    with pytest.raises(EnvironmentLoadError, match="two reward functions are named score"):
        as_environment({"dataset": [{"prompt": "a"}], "reward_funcs": [score, score]}, "plain")
    with pytest.raises(EnvironmentLoadError, match="train row 0 is a str, not a dict"):
        as_environment({"dataset": ["a"], "reward_funcs": [score]}, "plain")


def test_data_hash_follows_the_arguments():
    base = data_fingerprint(get_environment("arithmetic", num_train=100, num_eval=10, seed=0), "arithmetic")
    same = data_fingerprint(get_environment("arithmetic", num_train=100, num_eval=10, seed=0), "arithmetic")
    seed = data_fingerprint(get_environment("arithmetic", num_train=100, num_eval=10, seed=1), "arithmetic")
    wider = data_fingerprint(get_environment("arithmetic", num_train=100, num_eval=10, max_value=9), "arithmetic")
    assert base == same
    assert base["args"]["seed"] == 0 and base["version"] == "1" and base["num_train"] == 100
    assert seed["train_hash"] != base["train_hash"] and seed["eval_hash"] != base["eval_hash"]
    assert wider["train_hash"] != base["train_hash"]
    rt = data_fingerprint(get_environment("reverse-text", num_train=100, num_eval=10))
    assert rt["train_hash"] != base["train_hash"]


def test_env_data_hash_is_the_trace_data_hash_for_non_ascii_rows():
    """One data hash: what `%prime_env` shows is what a trace records, accents and all."""
    from primenb.envs.fingerprint import rows_hash as env_hash
    from primenb.protocol.hashing import rows_hash as trace_hash

    rows = [{"prompt": "renverse: été", "answer": "été"}, {"prompt": "日本", "answer": "本日"}]
    assert env_hash(rows) == trace_hash(rows)[0]
    assert env_hash(rows) != env_hash(rows[::-1])
