"""`%prime_eval` through verifiers' own evaluation, against a running primenb server.

The server serves the untrained embedded base model (no training: fast). Its replies are fixed at
temperature 0, so each test asks the server itself for the same prompts with the `openai` client
and scores those replies by hand: verifiers' rewards must equal that independent score, sample by
sample, and the server must have answered every rollout."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from primenb.serve import client

BASE = "primenb/tiny-byte"
TOKENS = 12
WORDS = ["ab", "cab", "bca", "dog", "tree"]


def equals_share(text: str) -> float:
    return text.count("=") / max(len(text), 1)


@pytest.fixture(scope="module")
def base_server(serve_home: Path) -> Iterator[client.Server]:
    s = client.start(base=BASE)
    try:
        yield s
    finally:
        s.stop()


def _requests(server: client.Server) -> int:
    """Requests answered by every running server: the eval uses the first that serves its model,
    which in the whole suite may be the session's shared server rather than this module's."""
    assert server in client.servers()
    return sum(int(s.stats()["requests"]) for s in client.servers())


def _greedy_text(server: client.Server, prompt: str) -> str:
    c = openai.OpenAI(base_url=server.url, api_key="unused")
    r = c.completions.create(model=BASE, prompt=prompt, max_tokens=TOKENS, temperature=0.0)
    return r.choices[0].text


def _greedy_chat(server: client.Server, messages: list[dict[str, str]]) -> str:
    c = openai.OpenAI(base_url=server.url, api_key="unused")
    r = c.chat.completions.create(model=BASE, messages=messages, max_tokens=TOKENS, temperature=0.0)  # type: ignore[arg-type]
    return r.choices[0].message.content or ""


@pytest.fixture
def local_env() -> Iterator[str]:
    """A primenb environment defined in this process: two weighted rewards over the raw reply."""
    from primenb.envs import register_environment
    from primenb.envs.registry import unregister_environment

    def equals(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [equals_share(str(c)) for c in completions]

    def length(prompts: list[Any], completions: list[Any], answer: list[str], **_: Any) -> list[float]:
        return [len(str(c)) / (TOKENS * len(a)) for c, a in zip(completions, answer, strict=True)]

    def factory() -> dict[str, Any]:
        rows = [{"prompt": w, "answer": w[::-1]} for w in WORDS]
        return {
            "dataset": rows,
            "eval_dataset": rows,
            "reward_funcs": [equals, length],
            "reward_weights": [1.0, 0.5],
            "text_template": "{prompt}=",
        }

    register_environment("vf-eval-chars", factory, overwrite=True)
    try:
        yield "vf-eval-chars"
    finally:
        unregister_environment("vf-eval-chars")


def test_a_primenb_environment_scored_by_verifiers_through_the_endpoint(
    base_server: client.Server, local_env: str
) -> None:
    from primenb.serve.evaluate import evaluate

    before = _requests(base_server)
    result = evaluate([BASE], local_env, num_examples=4, rollouts=2, max_tokens=TOKENS)
    assert _requests(base_server) - before == 8  # every rollout went through the endpoint
    # verifiers' per-rollout working folders were made (and removed) in primenb's home, not ~/.cache
    assert not any((Path(os.environ["PRIME_HOME"]) / "cache" / "verifiers" / "runtimes" / "subprocess").iterdir())
    row = result.table.iloc[0]
    assert result.evaluator == "verifiers" and row["evaluator"] == "verifiers" and row["n"] == 8
    # independently: the server's own greedy replies to the environment's text prompts, by hand
    expected = []
    for w in WORDS[:4]:
        text = _greedy_text(base_server, f"{w}=")  # a raw model sees the environment's prompt format
        expected.append((equals_share(text), len(text) / (TOKENS * len(w)), text))
    samples = result.samples.sort_values(["rollout", "example"])
    for (_, s), (eq, ln, text) in zip(samples.iterrows(), expected * 2, strict=True):
        assert s["completion"] == text.encode("unicode_escape").decode("ascii")
        assert s["reward"] == pytest.approx(eq + 0.5 * ln, abs=1e-12)
    assert row["reward/equals"] == pytest.approx(sum(e[0] for e in expected) / 4, abs=1e-12)
    assert row["reward/length"] == pytest.approx(sum(e[1] for e in expected) / 4, abs=1e-12)
    assert row["reward_mean"] == pytest.approx(sum(e[0] + 0.5 * e[1] for e in expected) / 4, abs=1e-12)
    assert row["reward_mean"] > 0  # the check is not vacuous: the untrained model's replies score

    # the fallback (no verifiers) scores the same replies the same way
    import primenb.serve.evaluate as ev

    orig = ev._verifiers_installed
    ev._verifiers_installed = lambda: False
    try:
        plain = evaluate([BASE], local_env, num_examples=4, rollouts=1, max_tokens=TOKENS)
    finally:
        ev._verifiers_installed = orig
    assert plain.evaluator == "primenb"
    assert list(plain.samples["reward"]) == pytest.approx(list(samples["reward"])[:4], abs=1e-12)


TASKSET = '''
"""Echo a word (a test taskset for verifiers' evaluation)."""

import verifiers.v1 as vf


class WordData(vf.TaskData):
    answer: str


class WordConfig(vf.TasksetConfig):
    words: list[str] = []


class WordTask(vf.Task[WordData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=2.0)
    async def equals(self, task: WordData, trace: vf.Trace) -> float:
        """Share of "=" in the reply."""
        text = trace.last_reply
        return text.count("=") / max(len(text), 1)

    @vf.reward(weight=1.0)
    async def parts(self, task: WordData, trace: vf.Trace) -> dict:
        """Keyed scores: whether the reply is the word, and its length in words' lengths."""
        text = trace.last_reply
        return {"exact": float(text == task.answer), "long": len(text) / (10 * len(task.answer))}


class WordTaskset(vf.Taskset[WordTask, WordConfig]):
    """Say a word back."""

    def load(self):
        for w in self.config.words:
            yield WordTask(WordData(prompt=w, answer=w), self.config.task)


__all__ = ["WordTaskset"]
'''


@pytest.fixture
def taskset_pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    root = tmp_path / "site"
    pkg = root / "vf_eval_words"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent(TASKSET).lstrip())
    monkeypatch.syspath_prepend(str(root))
    yield "vf_eval_words"
    for name in [m for m in sys.modules if m.split(".")[0] == "vf_eval_words"]:
        del sys.modules[name]


def test_a_verifiers_taskset_is_evaluated_as_itself(base_server: client.Server, taskset_pkg: str) -> None:
    from primenb.serve.evaluate import evaluate

    words = ["ab", "cab", "dog"]
    before = _requests(base_server)
    result = evaluate([BASE], taskset_pkg, args={"words": words}, num_examples=3, max_tokens=TOKENS)
    assert _requests(base_server) - before == 3
    row = result.table.iloc[0]
    assert row["evaluator"] == "verifiers" and row["n"] == 3
    # its own rewards, keyed ones as verifiers records them (one column per key)
    assert {"reward/equals", "reward/exact", "reward/long"} <= set(result.table.columns)
    expected = []
    for w in words:
        text = _greedy_chat(base_server, [{"role": "user", "content": w}]).strip()  # last_reply strips
        expected.append(2.0 * equals_share(text) + float(text == w) + len(text) / (10 * len(w)))
    assert list(result.samples["reward"]) == pytest.approx(expected, abs=1e-12)
    assert row["reward_mean"] == pytest.approx(sum(expected) / 3, abs=1e-12) and row["reward_mean"] > 0


def test_a_rollout_the_server_refuses_is_a_clear_error(base_server: client.Server) -> None:
    from primenb.envs import register_environment
    from primenb.envs.registry import unregister_environment
    from primenb.errors import PrimenbError
    from primenb.serve.evaluate import evaluate

    def share(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [equals_share(str(c)) for c in completions]

    rows = [{"prompt": "ab"}, {"prompt": "x" * 100_000}]  # the second is over the model's context
    register_environment("vf-eval-long", lambda: {"dataset": rows, "reward_funcs": [share]})
    try:
        with pytest.raises(PrimenbError, match=r"1 of 2 rollouts failed \(first: .*maximum context length"):
            evaluate([BASE], "vf-eval-long", num_examples=2, max_tokens=TOKENS)
    finally:
        unregister_environment("vf-eval-long")


def test_a_multi_turn_taskset_is_evaluated_on_its_episodes(base_server: client.Server) -> None:
    """A taskset one turn cannot express (reverse-turns: its own Env, two user turns with feedback
    between them) is played episode by episode by verifiers' loop against the endpoint and scored
    by verifiers; the table and samples have the one-turn eval's shape plus turns and failures."""
    from primenb.serve.evaluate import evaluate

    def run() -> Any:
        return evaluate(
            [BASE],
            "reverse-turns",
            args={"split": "eval", "num_tasks": 3},
            num_examples=3,
            rollouts=2,
            temperature=1.0,
            max_tokens=8,
            store=False,
        )

    before = _requests(base_server)
    res = run()
    (row,) = res.table.to_dict("records")
    assert row["evaluator"] == "verifiers episodes" and res.evaluator == "verifiers episodes"
    assert row["examples"] == 3 and row["n"] == 6 and row["rollouts"] == 2
    assert row["failed"] == 0 and row["turns_mean"] == 2.0  # both user turns were played
    assert 0.0 <= row["ci95_low"] <= row["reward_mean"] <= row["ci95_high"] <= 1.0
    assert _requests(base_server) - before >= 12  # two model turns in each of the six episodes
    samples = res.samples
    assert list(zip(samples["example"], samples["rollout"], strict=True)) == [
        (e, r) for e in range(3) for r in range(2)
    ]
    assert set(samples["turns"]) == {2} and samples["seed"].nunique() == 2  # a seed per rollout round
    assert all(0.0 <= r <= 1.0 for r in samples["reward"])
    assert all(p.startswith("Reverse") for p in samples["prompt"]), samples["prompt"].tolist()
    assert run().samples["completion"].tolist() == samples["completion"].tolist()  # seeded: repeatable


def test_an_eval_of_a_trace_plays_its_episodes_in_the_seat_its_run_played(
    base_server: client.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: the trace's config says its run played reverse-turns with one model turn
    (``env.agent.max_turns = 1``); an eval of the trace plays the episodes that way, not in the
    taskset's default seat (two turns), while the arguments given (``--args``) still win. The seat
    of a trace not made here is used only with ``trust``, as its recorded arguments are."""
    from types import SimpleNamespace

    import primenb.serve.evaluate as ev
    from primenb.traces.trust import UntrustedTrace

    config = {
        "eval": {
            "source": [
                {
                    "name": "turns",
                    "env": {"taskset": {"id": "reverse-turns", "num_tasks": 9}, "agent": {"max_turns": 1}},
                }
            ]
        }
    }
    doc: dict[str, Any] = {}
    trace = SimpleNamespace(id="t-seat", name="seat", doc=doc, get=doc.get, run_dir=None, data={}, config=config)
    monkeypatch.setattr(ev, "_targets", lambda refs, running: [ev.Target("seat", BASE, trace)])
    monkeypatch.setattr(ev, "_server_for", lambda targets: (base_server, False))
    settings: dict[str, Any] = {"args": {"split": "eval", "num_tasks": 2}, "num_examples": 2, "max_tokens": 8}
    with pytest.raises(UntrustedTrace):  # the recorded seat is the trace's choice of code: not made here
        ev.evaluate(["seat"], "reverse-turns", store=False, **settings)
    res = ev.evaluate(["seat"], "reverse-turns", store=False, trust=True, **settings)
    (row,) = res.table.to_dict("records")
    assert row["examples"] == 2  # the arguments given, not the trace's num_tasks = 9
    assert row["turns_mean"] == 1.0 and set(res.samples["turns"]) == {1}  # the run's seat: one model turn
