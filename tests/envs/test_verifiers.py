"""verifiers v1 tasksets (the real `verifiers` 0.4 package) as environments."""

from __future__ import annotations

import asyncio

import pytest

from primenb.envs import (
    EnvironmentArgumentError,
    EnvironmentLoadError,
    UnsupportedEnvironmentError,
    get_environment,
    resolve,
)
from primenb.envs import verifiers_adapter as va
from primenb.envs.catalog import list_rows, show

from .conftest import write


def test_verifiers_is_the_real_package():
    import verifiers

    assert verifiers.__version__.startswith("0.4.")


def test_taskset_rows_and_rewards(tasksets, home):
    assert resolve("echo-words").source == "verifiers"
    assert resolve("someone/echo-words@0.2.0").where == "echo_words"  # hub ids map like verifiers' loader
    env = get_environment("echo-words", num_tasks=6, seed=1)
    assert [r["prompt"] for r in env.train_rows()] == ["ba", "cab", "abc", "bca", "ab", "ba"]
    assert env.train_rows()[0] == {"prompt": "ba", "answer": "ba", "info": {"vf_idx": 0}}
    assert env.system_prompt == "Echo the word."
    assert env.reward_names() == ["exact", "starts"] and env.reward_weights == [1.0, 0.5]
    assert env.reward_funcs[0].__doc__ == "1.0 when the reply is the word."
    rows = env.train_rows()[:3]
    completions = ["ba", "cx", [{"role": "assistant", "content": "zzz"}]]
    assert env.score([r["prompt"] for r in rows], completions, rows) == [1.5, 0.5, 0.0]


def test_a_reward_that_raises_on_one_completion_scores_it_zero(tasksets, home):
    env = get_environment("echo-words", num_tasks=3)
    starts = env.reward_funcs[1]
    info = [r["info"] for r in env.train_rows()]
    assert starts(prompts=["ab"] * 3, completions=["a", "", "c"], info=info, answer=["ab", "ba", "cab"]) == [
        1.0,
        0.0,
        1.0,
    ]
    assert starts.failed == 1


def test_rewards_run_inside_a_running_event_loop(tasksets, home):
    env = get_environment("echo-words", num_tasks=2)
    rows = env.train_rows()

    async def in_a_notebook_cell():
        return env.score(["x", "x"], ["ab", "zz"], rows)

    assert asyncio.run(in_a_notebook_cell()) == [1.5, 0.0]


def test_arguments_are_validated_by_the_taskset_config(tasksets, home):
    with pytest.raises(EnvironmentArgumentError, match=r"bad arguments .*num_taks.*it accepts: .*num_tasks"):
        get_environment("echo-words", num_taks=3)
    assert va.taskset_args("echo-words")["num_tasks"] == 20


def test_tools_are_not_supported_locally(tasksets, home):
    with pytest.raises(UnsupportedEnvironmentError) as err:
        get_environment("calc-tools")
    assert "its tasks use tools" in str(err.value)
    assert "the engine trains it on verifiers' own episodes" in str(err.value)


def test_multi_agent_env_and_harness_are_not_supported(tasksets, home):
    write(
        tasksets / "two_agents" / "__init__.py",
        """
import verifiers.v1 as vf
from echo_words.taskset import EchoWordsTaskset


class Duo(vf.SingleAgentEnv):
    pass


__all__ = ["EchoWordsTaskset", "Duo"]
""",
    )
    with pytest.raises(UnsupportedEnvironmentError, match="comes with its own environment Duo"):
        get_environment("two-agents")
    write(
        tasksets / "own_harness" / "__init__.py",
        """
import verifiers.v1 as vf
from echo_words.taskset import EchoWordsTaskset


class Shell(vf.Harness):
    pass


__all__ = ["EchoWordsTaskset", "Shell"]
""",
    )
    with pytest.raises(UnsupportedEnvironmentError, match=r"comes with its own harness .*verifiers' own episodes"):
        get_environment("own-harness")


def test_broken_taskset_reports_which_and_why(tasksets, home):
    write(
        tasksets / "broken_set" / "__init__.py",
        """
import verifiers.v1 as vf
from echo_words.taskset import EchoTask, EchoData


class BrokenSet(vf.Taskset[EchoTask, vf.TasksetConfig]):
    def load(self):
        yield EchoTask(EchoData(prompt="a", answer="a"), self.config.task)
        raise OSError("dataset file missing")


__all__ = ["BrokenSet"]
""",
    )
    write(tasksets / "not_a_taskset" / "__init__.py", "X = 1\n")
    with pytest.raises(
        EnvironmentLoadError, match="'broken-set' raised while loading its tasks: OSError: dataset file missing"
    ):
        get_environment("broken-set")
    with pytest.raises(EnvironmentLoadError, match=r"'not-a-taskset' could not be loaded: .*defines no `__all__`"):
        get_environment("not-a-taskset")


def test_installed_taskset_is_listed_and_shown(tasksets, home):
    rows = {r["id"]: r for r in list_rows()}
    assert rows["echo-words"]["source"] == "verifiers"
    assert rows["echo-words"]["version"] == "0.2.0"
    assert rows["echo-words"]["description"] == "Echo a word back"
    assert "calc-tools" not in rows  # on sys.path but not an installed distribution
    card = show("echo-words", num_tasks=4)
    assert card.source == "verifiers" and card.version == "0.2.0" and card.num_train == 4 and card.eval_is_train
    assert [(r.name, r.weight) for r in card.rewards] == [("exact", 1.0), ("starts", 0.5)]
    s = card.samples[0]
    assert s.perfect_reward == 1.5 and s.empty_reward == 0.0
    assert "ValueError: empty reply" in s.empty_by_func["starts"]
