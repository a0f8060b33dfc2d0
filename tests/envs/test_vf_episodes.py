"""verifiers' own episodes against a primenb server (`primenb.envs.vf_episodes`).

Two local verifiers v1 environments (``tests/data/vf_envs``): ``alphabet-sort`` (its own
``SingleAgentEnv`` playing scripted user turns through ``interaction.turn``) and ``weather-tool``
(a task-scoped ``Toolset``, an MCP server per rollout). They run through verifiers' loop with the
``null`` harness in the ``subprocess`` runtime, its training client rendering each turn and
calling the server's ``/inference/v1/generate``. The slow tests start a server; the rest check
the parts that need none.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from primenb.envs import vf_episodes as ve
from primenb.envs.errors import EpisodePartError
from primenb.envs.vf_renderer import HermesRenderer, HermesTokenParser, renderer_config
from tests.backends.conftest import need_service

VF_ENVS = Path(__file__).resolve().parent.parent / "data" / "vf_envs"
MODEL = "primenb/tiny-byte"
TOOL_AGENT = "tool-agent"


@pytest.fixture(scope="module")
def vf_envs() -> Iterator[Path]:
    """The test environments importable here and (PYTHONPATH) in the tool servers verifiers
    starts with ``python -m``."""
    old_path, old_env = list(sys.path), os.environ.get("PYTHONPATH")
    sys.path.insert(0, str(VF_ENVS))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VF_ENVS), old_env]))
    try:
        yield VF_ENVS
    finally:
        sys.path[:] = old_path
        for name in [m for m in sys.modules if m.split(".")[0] in ("alphabet_sort", "weather_tool")]:
            del sys.modules[name]
        if old_env is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_env


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The embedded models' tokenizer as a folder: what the training client's renderer loads."""
    from primenb.engine.models import build_byte_tokenizer

    path = tmp_path_factory.mktemp("tokenizer")
    build_byte_tokenizer().save_pretrained(str(path))
    return str(path)


@pytest.fixture(scope="module")
def renderer(tokenizer_dir: str) -> Any:
    return ve.build_renderer(tokenizer_dir)


# ---------------------------------------------------------------------------------------------
# no server


def test_the_renderer_is_the_chat_template_and_parses_hermes_calls(tokenizer_dir: str, renderer: Any) -> None:
    from renderers.base import ToolCallParseStatus
    from transformers import AutoTokenizer

    assert isinstance(renderer, HermesRenderer) and renderer.supports_tools
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
    assert renderer.render(messages, tools=tools, add_generation_prompt=True).token_ids == tok.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    enc = lambda text: tok.encode(text, add_special_tokens=False)  # noqa: E731
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    parsed = renderer.parse_response(enc("Let me look. " + call) + [tok.eos_token_id])
    assert parsed.content == "Let me look. "
    ((one,),) = [parsed.tool_calls]
    assert (one.name, one.arguments, one.status) == ("get_weather", {"city": "Paris"}, ToolCallParseStatus.OK)
    parser = HermesTokenParser(tok)
    ids = enc(call + call.replace("Paris", "Oslo"))
    assert [c.arguments for c in parser.extract(ids)[1]] == [{"city": "Paris"}, {"city": "Oslo"}]
    assert [c.status for c in parser.extract(enc("<tool_call>{bad json</tool_call>"))[1]] == ["invalid_json"]
    assert [c.status for c in parser.extract(enc('<tool_call>{"name": "x"'))[1]] == ["unclosed_block"]
    assert [c.status for c in parser.extract(enc('<tool_call>{"arguments": {}}</tool_call>'))[1]] == ["missing_name"]
    assert parser.extract(enc("<toool_call>no call")) == (enc("<toool_call>no call"), [])


def test_renderer_choice(tokenizer_dir: str) -> None:
    import renderers

    assert ve.renderer_for(tokenizer_dir) == renderer_config()  # the template writes <tool_call>
    assert ve.renderer_for("Qwen/Qwen3-0.6B") is None  # renderers' own family renderer (auto)
    assert ve.renderer_for(tokenizer_dir, "default") == renderers.DefaultRendererConfig()
    with pytest.raises(EpisodePartError, match=r"tokenizer 'primenb/tiny-byte'.*tokenizer=<a folder"):
        ve.build_renderer(MODEL)  # a hub name, offline: said at once, not after the Hub's retries


def test_parts_that_cannot_run_here_are_named_before_any_episode(vf_envs: Path) -> None:
    with pytest.raises(EpisodePartError, match=r"harness 'codex'.*downloads its agent program.*nodejs\.org"):
        ve.check_env(ve.load_env("alphabet-sort", harness="codex"))
    with pytest.raises(EpisodePartError, match=r"runtime of agent 'agent'.*'prime' is a remote sandbox"):
        ve.check_env(ve.load_env("alphabet-sort", runtime="prime"))
    env = ve.load_env("weather-tool", {"task": {"tools": {"url": "https://tools.example.com/mcp"}}})
    with pytest.raises(EpisodePartError, match=r"tool server.*remote MCP server"):
        ve.check_env(env)
    if shutil.which("docker") is None:
        with pytest.raises(EpisodePartError, match="needs `docker`"):
            ve.check_env(ve.load_env("alphabet-sort", runtime="docker"))
    ve.check_env(ve.load_env("weather-tool"))  # null harness, subprocess runtime, a local tool server: fine


def test_offline_chat_program_variables(tmp_path: Path) -> None:
    env = ve.chat_program_env(tmp_path)
    assert env["PIP_NO_INDEX"] == "1" and env["UV_FIND_LINKS"] == env["PIP_FIND_LINKS"] == str(tmp_path)
    assert env["UV_DEFAULT_INDEX"].startswith("file://") and env["UV_PYTHON_DOWNLOADS"] == "never"
    assert not any(Path(env["UV_DEFAULT_INDEX"].removeprefix("file://")).iterdir())  # an index with nothing
    if ve.uv_dir():
        assert env["PATH"].split(os.pathsep)[0] == ve.uv_dir()
    with pytest.raises(EpisodePartError, match="wheelhouse"):
        ve.chat_program_env(tmp_path / "missing")


# ---------------------------------------------------------------------------------------------
# against a server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, vf_envs: Path, tool_checkpoint: Path) -> Iterator[Any]:
    """The embedded model, and the checkpoint that calls the weather tool as ``tool-agent``."""
    from primenb.serve import client

    old = os.environ.get("PRIME_HOME")
    os.environ["PRIME_HOME"] = str(tmp_path_factory.mktemp("episodes-home"))
    srv = client.start(base=MODEL)
    try:
        r = httpx.post(
            srv.url.removesuffix("/v1") + "/admin/models",
            json={"id": TOOL_AGENT, "checkpoint": str(tool_checkpoint)},
            timeout=300,
        )
        assert r.status_code == 201, r.text
        yield srv
    finally:
        srv.stop()
        if old is None:
            os.environ.pop("PRIME_HOME", None)
        else:
            os.environ["PRIME_HOME"] = old


def _same_ids_as_the_renderer(episode: ve.Episode, renderer: Any) -> None:
    for turn in episode.turns:
        expected = renderer.render(turn.messages, tools=turn.tools or None, add_generation_prompt=True).token_ids
        assert turn.prompt_ids == expected
        assert len(turn.completion_ids) == len(turn.logprobs) > 0
        assert all(lp <= 0.0 for lp in turn.logprobs)


@pytest.mark.slow
def test_multi_turn_episodes_through_verifiers_loop(server: Any, tokenizer_dir: str, renderer: Any) -> None:
    alphabet = importlib.import_module("alphabet_sort")
    episodes = ve.run_episodes(
        "alphabet-sort",
        args={"min_turns": 2, "max_turns": 3, "num_tasks": 2},
        base_url=server.url,
        model=MODEL,
        num_tasks=2,
        rollouts=2,
        tokenizer=tokenizer_dir,
        sampling={"temperature": 1.0, "max_tokens": 24},
    )
    assert [e.task for e in episodes] == [0, 0, 1, 1]
    tasks = {t.data.idx: t for t in ve.load_env("alphabet-sort", {"num_tasks": 2}).taskset}
    for ep in episodes:
        assert ep.ok and not ep.errors, ep.errors
        (run,) = ep.runs
        script = tasks[ep.task].data.info
        assert len(ep.turns) == len(script["user_turns"]) >= 2
        assert run.stop_condition == "user_closed"  # the scripted user ran out of turns (no limit hit)
        # each model turn saw the scripted user's message; the conversation holds them in order
        assert [t.messages[-1] for t in ep.turns] == [{"role": "user", "content": m} for m in script["user_turns"]]
        assert [m["content"] for m in ep.messages if m["role"] == "user"] == script["user_turns"]
        replies = [t.reply["content"] for t in ep.turns]
        expected = sum(alphabet.turn_score(r, g) for r, g in zip(replies, script["ground_truths"], strict=True))
        assert ep.reward == pytest.approx(expected / len(replies)) and run.rewards == {"sorted_lists": ep.reward}
        assert run.metrics["answered_turns"] == len(replies)
        _same_ids_as_the_renderer(ep, renderer)


@pytest.mark.slow
def test_the_agents_turn_limit_ends_an_episode(server: Any, tokenizer_dir: str) -> None:
    (ep,) = ve.run_episodes(
        "alphabet-sort",
        args={"min_turns": 3, "max_turns": 3, "num_tasks": 1},
        base_url=server.url,
        model=MODEL,
        tokenizer=tokenizer_dir,
        sampling={"max_tokens": 8},
        max_turns=2,  # [env.agent] max_turns: model turns
    )
    (run,) = ep.runs
    assert len(ep.turns) == 2 and run.stop_condition == "max_turns" and run.is_truncated
    assert run.rewards["sorted_lists"] is not None  # scored all the same, as verifiers does


@pytest.mark.slow
def test_tool_episodes_call_the_tool_and_score_its_answer(server: Any, tokenizer_dir: str, renderer: Any) -> None:
    forecasts = importlib.import_module("weather_tool.servers.weather").FORECASTS
    episodes = ve.run_episodes(
        "weather-tool",
        base_url=server.url,
        model=TOOL_AGENT,
        num_tasks=None,
        tokenizer=tokenizer_dir,
        sampling={"temperature": 0.0, "max_tokens": 120},
        max_turns=4,
    )
    assert len(episodes) == len(forecasts)
    for ep in episodes:
        assert ep.ok, ep.errors
        (run,) = ep.runs
        assert [t["function"]["name"] for t in ep.turns[0].tools] == ["get_weather"]
        calls = [c for t in ep.turns for c in t.reply.get("tool_calls") or []]
        results = [m for m in ep.messages if m["role"] == "tool"]
        assert len(results) == len(calls) == run.metrics["tool_calls"]  # a call is answered; no call, no tool turn
        for call, result in zip(calls, results, strict=True):
            city = json.loads(call["function"]["arguments"])["city"]
            assert result["tool_call_id"] == call["id"] and result["content"] == forecasts.get(city)
        forecast = list(forecasts.values())[ep.task]
        assert run.rewards["called_tool"] == float(any(r["content"] == forecast for r in results))
        if calls:  # the tool's answer is the next turn's input, and the model's reply follows it
            assert len(ep.turns) == len(calls) + 1 and ep.turns[1].messages[-1]["role"] == "tool"
        _same_ids_as_the_renderer(ep, renderer)
    paris = episodes[0]
    (call,) = paris.turns[0].reply["tool_calls"]  # the checkpoint's greedy answer to this question
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}
    assert paris.runs[0].rewards == {"called_tool": 1.0, "answered": 1.0} and paris.reward == 2.0


@pytest.mark.slow
def test_the_eval_client_runs_the_same_loop_without_tokens(server: Any) -> None:
    (ep,) = ve.run_episodes(
        "alphabet-sort",
        args={"min_turns": 2, "max_turns": 2, "num_tasks": 1},
        base_url=server.url,
        model=MODEL,
        client="eval",
        sampling={"max_tokens": 8},
    )
    assert ep.ok and len(ep.turns) == 2 and not any(t.has_tokens for t in ep.turns)


@pytest.mark.slow
def test_the_chat_program_offline_from_a_wheelhouse(
    server: Any, tokenizer_dir: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh uv cache and a package index with nothing in it: the chat program's packages can
    only come from the wheelhouse (built here with pip from the index, as CI reaches it)."""
    wheelhouse = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "download", "-q", "-d", str(wheelhouse), *ve.CHAT_PROGRAM_PACKAGES]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:  # skipped off CI only: CI reaches the index, so there it fails
        need_service(f"no package index to build the wheelhouse from: {done.stderr[-300:]}")
    import verifiers.v1.runtimes.subprocess as runtime

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setattr(runtime.SubprocessRuntime, "scripts_dir", str(tmp_path / "scripts"))
    monkeypatch.setattr(runtime.SubprocessRuntime, "_interpreters", {})
    common = {"base_url": server.url, "model": MODEL, "tokenizer": tokenizer_dir, "sampling": {"max_tokens": 4}}
    (ep,) = ve.run_episodes("weather-tool", wheelhouse=wheelhouse, **common)
    assert ep.ok and len(ep.turns) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache2"))
    monkeypatch.setattr(runtime.SubprocessRuntime, "scripts_dir", str(tmp_path / "scripts2"))
    monkeypatch.setattr(runtime.SubprocessRuntime, "_interpreters", {})
    with pytest.raises(EpisodePartError, match=r"chat program: .*uv script.*wheelhouse.*mcp"):
        ve.run_episodes("weather-tool", wheelhouse=empty, **common)
