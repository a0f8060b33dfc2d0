"""primenb's built-in tool taskset ``lookup-code`` (`primenb/envs/vf_builtin`): found by id, held-out
words disjoint from the training words, a reward only the tool's answer earns, and an ideal
conversation the SFT warm-up renders with the tools exactly as an episode's model request does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from primenb.envs import get_environment
from primenb.envs.errors import UnsupportedEnvironmentError
from primenb.envs.verifiers_adapter import builtin_tasksets, could_be_taskset

MODEL = "primenb/tiny-byte"


def _env(**args: Any) -> Any:
    from primenb.envs.episode_env import load_episode_environment

    return load_episode_environment("lookup-code", args, None)


def test_it_is_found_by_id_and_runs_as_episodes() -> None:
    assert "lookup-code" in builtin_tasksets()
    assert could_be_taskset("lookup-code")
    with pytest.raises(UnsupportedEnvironmentError, match="verifiers' own episodes"):
        get_environment("lookup-code")


def test_tasks_ideal_conversations_and_held_out_words() -> None:
    train, held = _env(num_tasks=300), _env(num_tasks=100, split="eval")
    assert len(train.tasks) == 300
    train_words = {t.data.info["word"] for t in train.tasks}
    held_words = {t.data.info["word"] for t in held.tasks}
    assert held_words and not held_words & train_words
    import lookup_code  # on sys.path now, as verifiers' loader imports it
    from lookup_code.servers.lookup import LookupToolset, code_for

    row = train.train_rows()[0]
    word = train.task(row["info"]).data.info["word"]
    ideal = train.ideal_conversation(row)
    assert [m["role"] for m in ideal] == ["user", "assistant", "tool", "assistant"]
    assert ideal[0]["content"] == f"What is the code for {word}?"
    (call,) = ideal[1]["tool_calls"]
    assert call["function"]["name"] == "lookup" and json.loads(call["function"]["arguments"]) == {"key": word}
    assert ideal[2]["content"] == ideal[3]["content"] == code_for(word) == LookupToolset.lookup(None, word)
    assert len({code_for(w) for w in train_words}) > 250  # codes differ by word: guessing one does not pay
    (tool,) = train.ideal_tools(row)
    assert tool["function"]["name"] == "lookup" and tool["function"]["parameters"]["required"] == ["key"]
    assert lookup_code.advertised_tools() == [tool]


def _trace(replies: list[str], tool_results: list[str], calls: int) -> Any:
    call = SimpleNamespace(id="c", type="function")
    assistant = [SimpleNamespace(content=None, tool_calls=[call] * calls)] + [
        SimpleNamespace(content=r, tool_calls=None) for r in replies
    ]
    return SimpleNamespace(
        assistant_messages=assistant,
        tool_messages=[SimpleNamespace(content=c) for c in tool_results],
        last_reply=replies[-1] if replies else "",
    )


def test_only_the_tools_answer_earns_the_reward() -> None:
    env = _env(num_tasks=3)
    task = env.tasks[0]
    code = task.data.info["code"]
    other = env.tasks[1].data.info["code"]

    def score(trace: Any) -> tuple[float, float]:
        return asyncio.run(task.looked_up(trace)), asyncio.run(task.answered(trace))

    assert score(_trace([code], [code], 1)) == (1.0, 1.0)  # the ideal episode: 0.2 + 0.8
    assert score(_trace([code], [], 0)) == (0.0, 0.0)  # the right code, guessed without the tool
    assert score(_trace([code], [other], 1)) == (0.0, 0.0)  # looked up another key
    assert score(_trace([f"The code is {code}."], [code], 1)) == (1.0, 0.0)  # looked up, not answered exactly
    assert score(_trace([code], [[{"type": "text", "text": code}]], 1))[1] == 1.0  # content parts
    assert asyncio.run(task.tool_calls(_trace([code], [code], 2))) == 2.0


def test_bad_arguments_are_one_clear_error() -> None:
    from primenb.envs.errors import EnvironmentLoadError

    with pytest.raises(EnvironmentLoadError, match="split must be 'train' or 'eval'"):
        _env(split="test")


@pytest.mark.slow
def test_the_warm_up_trains_on_the_tools_an_episode_advertises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SFT warm-up's tokens for an ideal conversation start with exactly the prompt ids an
    episode's training client sends for its first turn (the same tools, the same schema)."""
    from trl import SFTConfig, SFTTrainer

    from primenb.engine.data import ideal_rows
    from primenb.engine.models import build_byte_tokenizer, load_model
    from primenb.envs import vf_episodes as ve
    from primenb.serve import client

    env = _env(num_tasks=2)
    rows = ideal_rows(env, "lookup-code", chat=True)
    assert rows[0]["tools"] and json.loads(rows[0]["tools"]) == env.ideal_tools(env.train_rows()[0])
    model, tok, _ = load_model(MODEL, seed=0)
    from datasets import Dataset

    trainer = SFTTrainer(
        model=model,
        args=SFTConfig(
            output_dir=str(tmp_path / "sft"),
            assistant_only_loss=True,
            report_to=[],
            max_length=512,
            bf16=False,
            use_cpu=True,
        ),
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
    )
    warm_ids = trainer.train_dataset[0]["input_ids"]
    tok_dir = tmp_path / "tokenizer"
    build_byte_tokenizer().save_pretrained(str(tok_dir))
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    srv = client.start(base=MODEL)
    try:
        (episode,) = ve.run_episodes(
            "lookup-code",
            args={"num_tasks": 1},
            base_url=srv.url,
            model=MODEL,
            num_tasks=1,
            tokenizer=str(tok_dir),
            sampling={"temperature": 0.0, "max_tokens": 4},
            max_turns=1,
        )
    finally:
        srv.stop()
    first = episode.turns[0]
    assert json.dumps(first.tools) == rows[0]["tools"]  # the schema verifiers advertised, keys in order
    assert first.messages == [{"role": "user", "content": env.ideal_conversation(env.train_rows()[0])[0]["content"]}]
    assert warm_ids[: len(first.prompt_ids)] == first.prompt_ids
    assert "<tools>" in tok.decode(first.prompt_ids) and '"lookup"' in tok.decode(first.prompt_ids)
