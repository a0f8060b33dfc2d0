"""primenb's built-in multi-turn verifiers taskset ``reverse-turns`` (`primenb/envs/vf_builtin`):
found by id like an installed taskset, trained on verifiers' episodes, held-out words disjoint
from the training words, feedback between turns, ideal conversations for an SFT warm-up."""

from __future__ import annotations

import pytest

from primenb.envs import get_environment
from primenb.envs.errors import UnsupportedEnvironmentError
from primenb.envs.verifiers_adapter import builtin_tasksets, could_be_taskset


def test_it_is_found_by_id_and_runs_as_episodes() -> None:
    assert "reverse-turns" in builtin_tasksets()
    assert could_be_taskset("reverse-turns")
    with pytest.raises(UnsupportedEnvironmentError, match="verifiers' own episodes"):
        get_environment("reverse-turns")


def test_tasks_feedback_and_held_out_words() -> None:
    from primenb.envs.episode_env import EpisodeEnvironment, load_episode_environment

    train = load_episode_environment("reverse-turns", {"num_tasks": 300, "turns": 3}, None)
    held = load_episode_environment("reverse-turns", {"num_tasks": 100, "turns": 3, "split": "eval"}, None)
    assert isinstance(train, EpisodeEnvironment) and len(train.tasks) == 300
    train_words = {w for t in train.tasks for w in t.data.info["words"]}
    held_words = {w for t in held.tasks for w in t.data.info["words"]}
    assert held_words and not held_words & train_words
    row = train.train_rows()[0]
    ideal = train.ideal_conversation(row)
    words = train.task(row["info"]).data.info["words"]
    assert [m["role"] for m in ideal] == ["user", "assistant"] * 3
    assert [m["content"] for m in ideal[1::2]] == [w[::-1] for w in words]
    assert ideal[0]["content"] == f"Reverse: {words[0]}"
    assert ideal[2]["content"] == f"Correct. Reverse: {words[1]}"
    import reverse_turns as rt  # on sys.path now, as verifiers' loader imports it

    assert rt.user_turn(1, "abc", "xyz", "zyx") == "Correct. Reverse: abc"
    assert rt.user_turn(1, "abc", "xyz", "nope") == "Not quite: it is zyx. Reverse: abc"
    assert rt.score("cba", "abc") == 1.0 and rt.score("", "abc") == 0.0 and 0 < rt.score("ca", "abc") < 1


def test_bad_arguments_are_one_clear_error() -> None:
    from primenb.envs.episode_env import load_episode_environment
    from primenb.envs.errors import EnvironmentArgumentError, EnvironmentLoadError

    with pytest.raises(EnvironmentLoadError, match="split must be 'train' or 'eval'"):
        load_episode_environment("reverse-turns", {"split": "test"}, None)
    with pytest.raises(EnvironmentArgumentError, match="max_turns must be a whole number"):
        load_episode_environment("reverse-turns", {}, {"max_turns": 0})


def test_two_sources_of_one_taskset_keep_their_tasks_apart(tmp_path) -> None:
    """Rows name tasks by source: two sources of the same taskset with other arguments never hand
    the trainer each other's tasks; sources named alike are refused, not mixed."""
    from primenb.engine.episodes import EpisodeRollouts
    from primenb.envs.episode_env import load_episode_environment

    short = load_episode_environment("reverse-turns", {"num_tasks": 3, "turns": 1}, None, source="short")
    long = load_episode_environment("reverse-turns", {"num_tasks": 3, "turns": 3}, None, source="long")
    rollouts = EpisodeRollouts(
        {"short": short, "long": long}, None, tmp_path, temperature=1.0, max_turn_tokens=8, seq_len=64
    )
    for name, env in (("short", short), ("long", long)):
        for row in env.train_rows():
            assert rollouts.by_label[row["prompt"]][:2] == (name, env)
    twin = load_episode_environment("reverse-turns", {"num_tasks": 3, "turns": 3}, None, source="short")
    with pytest.raises(ValueError, match="give each source its own name"):
        EpisodeRollouts({"short": short, "twin": twin}, None, tmp_path, temperature=1.0, max_turn_tokens=8, seq_len=64)
