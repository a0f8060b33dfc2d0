"""The engine bench's episode halves (bench/bench_engine.py, ``BENCH_MODES=episodes,turns``) time
what they say they time: the one-turn taskset they add goes to the episode path with reverse-text's
own strings, while today's reverse-text keeps the engine's own generation; TRL's loop in
bench/trl_turns.py reads every reply as a call of the environment's tool."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from primenb import load_config
from primenb.engine.data import build_sources
from primenb.engine.plan import build_plan
from primenb.envs.episode_env import EpisodeEnvironment
from primenb.envs.reverse_text import ReverseTextEnv, lcs_ratio, load_environment, parse_reversed

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.syspath_prepend(str(BENCH / "vf_envs"))
    import bench_engine

    yield bench_engine
    for name in ("bench_engine", "trl_turns", "reverse_text_episode"):
        sys.modules.pop(name, None)


def _env(config: str) -> object:
    plan = build_plan(load_config(config).resolved())
    return build_sources(plan.sources)[0].env


def test_the_one_turn_taskset_runs_on_the_episode_path_with_reverse_texts_strings(bench: ModuleType) -> None:
    engine = _env(bench.small_grpo("reverse-text", episodes=False, max_tokens=48, seq_len=128))
    episode = _env(
        bench.small_grpo("reverse-text-episode", episodes=True, max_tokens=48, seq_len=128, args="num_tasks = 300\n")
    )
    assert isinstance(engine, ReverseTextEnv) and not isinstance(engine, EpisodeEnvironment)
    assert isinstance(episode, EpisodeEnvironment)
    assert episode.seat.harness == "null" and episode.seat.runtime == "subprocess"
    strings = [r["prompt"] for r in load_environment().train_rows()][:300]
    texts = [t.data.info["text"] for t in episode.tasks]
    assert texts == strings  # the same strings, in the same order
    assert all(t.data.info["answer"] == s[::-1] for t, s in zip(episode.tasks[:50], strings, strict=False))


def test_trl_reads_every_reply_as_a_call_of_the_environments_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import trl_turns

    from primenb.engine.models import build_byte_tokenizer

    tok = build_byte_tokenizer()
    ids = tok("olleh", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    message = trl_turns.every_reply_answers(tok, ids)
    assert message["content"] == "olleh"
    assert message["tool_calls"] == [
        {"type": "function", "function": {"name": "answer", "arguments": {"reply": "olleh"}}}
    ]
    assert lcs_ratio(parse_reversed("<reversed_text>olleh</reversed_text>"), "olleh") == 1.0
