"""Agents on a served adapter: a checkpoint whose greedy reply to a weather question is a tool call
(`toolmodel`), driven by clients nobody here wrote, each unchanged: `openai` (plain and through its
own stream helpers), LangChain's ``bind_tools``, LiteLLM, and the seeds' agent library
``@mariozechner/pi-ai`` (a node script). Each sends the tool's result back and gets words."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from primenb.serve import client

from .toolmodel import ANSWER, CALL_ARGS, weather_tool

pytestmark = pytest.mark.slow  # fits a small adapter and starts a server process

AGENT = "tool-agent"
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
PIAI = Path(__file__).parent / "piai"


@pytest.fixture(scope="module")
def tool_server(serve_home: Path, tool_checkpoint: Path) -> Iterator[client.Server]:
    checkpoint = tool_checkpoint
    server = client.start(base="primenb/tiny-byte")
    try:
        r = httpx.post(
            server.url.removesuffix("/v1") + "/admin/models",
            json={"id": AGENT, "checkpoint": str(checkpoint)},
            timeout=120,
        )
        assert r.status_code == 201, r.text
        yield server
    finally:
        server.stop()


def _oai(server: client.Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", timeout=120)


def _after_call(call_id: str, arguments: str) -> list[dict[str, Any]]:
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": arguments}}
    return [
        *QUESTION,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny, 21 C"},
    ]


def test_the_card_says_how_the_model_renders_and_parses(tool_server: client.Server) -> None:
    card = next(c for c in tool_server.cards() if c["id"] == AGENT)
    assert card["primenb"]["renderer"] == "tiny-byte-chat" and card["primenb"]["tool_call_parser"] == "hermes"


def test_openai_tool_call_round_trip(tool_server: client.Server) -> None:
    oai = _oai(tool_server)
    first = oai.chat.completions.create(
        model=AGENT, messages=QUESTION, tools=[weather_tool()], temperature=0, max_tokens=120
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls", choice
    (call,) = choice.message.tool_calls or []
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == CALL_ARGS
    assert call.id.startswith("call_") and choice.message.content is None
    final = oai.chat.completions.create(
        model=AGENT,
        messages=_after_call(call.id, call.function.arguments),
        tools=[weather_tool()],
        temperature=0,
        max_tokens=60,
    )
    assert final.choices[0].finish_reason == "stop"
    assert final.choices[0].message.content == ANSWER and not final.choices[0].message.tool_calls


def test_openai_stream_helpers_assemble_the_streamed_call(tool_server: client.Server) -> None:
    oai = _oai(tool_server)
    plain = oai.chat.completions.create(
        model=AGENT, messages=QUESTION, tools=[weather_tool()], temperature=0, max_tokens=120
    )
    with oai.chat.completions.stream(
        model=AGENT, messages=QUESTION, tools=[weather_tool()], temperature=0, max_tokens=120
    ) as stream:
        kinds = {event.type for event in stream}
        done = stream.get_final_completion()
    assert "tool_calls.function.arguments.done" in kinds, kinds
    got, want = done.choices[0], plain.choices[0]
    assert got.finish_reason == "tool_calls"
    assert [(c.function.name, c.function.arguments) for c in got.message.tool_calls or []] == [
        (c.function.name, c.function.arguments) for c in want.message.tool_calls or []
    ]


def test_tool_choice_none_and_parallel_calls_off(tool_server: client.Server) -> None:
    oai = _oai(tool_server)
    off = oai.chat.completions.create(
        model=AGENT, messages=QUESTION, tools=[weather_tool()], tool_choice="none", temperature=0, max_tokens=40
    )
    assert not off.choices[0].message.tool_calls and off.choices[0].finish_reason != "tool_calls"
    one = oai.chat.completions.create(
        model=AGENT,
        messages=QUESTION,
        tools=[weather_tool()],
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=120,
    )
    assert len(one.choices[0].message.tool_calls or []) == 1


def test_constrained_modes_are_refused_by_name(tool_server: client.Server) -> None:
    oai = _oai(tool_server)
    for extra, param in [
        ({"tool_choice": "required"}, "tool_choice"),
        ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, "response_format"),
    ]:
        with pytest.raises(openai.BadRequestError) as refused:
            oai.chat.completions.create(model=AGENT, messages=QUESTION, tools=[weather_tool()], **extra)
        body: Any = refused.value.body
        assert body["param"] == param and body["code"] == "unsupported_parameter", body


def test_langchain_bind_tools_and_litellm(tool_server: client.Server) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of its price list
    import litellm
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    @tool
    def get_weather(city: str) -> str:
        """Weather in a city"""
        return "sunny, 21 C"

    chat = ChatOpenAI(model=AGENT, base_url=tool_server.url, api_key="unused", max_tokens=120, temperature=0)
    bound = chat.bind_tools([get_weather])
    asked = bound.invoke("What is the weather in Paris?")
    assert [(c["name"], c["args"]) for c in asked.tool_calls] == [("get_weather", CALL_ARGS)]
    result = ToolMessage(content="sunny, 21 C", tool_call_id=asked.tool_calls[0]["id"])
    assert bound.invoke(["What is the weather in Paris?", asked, result]).content == ANSWER

    reply = litellm.completion(
        model=f"openai/{AGENT}",
        messages=QUESTION,
        tools=[weather_tool()],
        api_base=tool_server.url,
        api_key="unused",
        temperature=0,
        max_tokens=120,
    )
    (call,) = reply.choices[0].message.tool_calls
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == CALL_ARGS


def test_clients_assemble_a_paced_stream(tool_server: client.Server, tool_checkpoint: Path) -> None:
    """``--stream-interval 4`` (vLLM's ``stream_interval``): a chunk carries up to four tokens of a
    choice. The `openai` stream helpers, LiteLLM and LangChain still assemble the call and the answer."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from langchain_core.messages import AIMessageChunk, ToolMessage
    from langchain_openai import ChatOpenAI

    paced = client.start(base="primenb/tiny-byte", stream_interval=4)
    try:
        r = httpx.post(
            paced.url.removesuffix("/v1") + "/admin/models",
            json={"id": AGENT, "checkpoint": str(tool_checkpoint)},
            timeout=120,
        )
        assert r.status_code == 201, r.text
        oai = _oai(paced)
        with oai.chat.completions.stream(
            model=AGENT, messages=QUESTION, tools=[weather_tool()], temperature=0, max_tokens=120
        ) as stream:
            (call,) = stream.get_final_completion().choices[0].message.tool_calls or []
        assert call.function.name == "get_weather" and json.loads(call.function.arguments) == CALL_ARGS
        answer = oai.chat.completions.create(
            model=AGENT,
            messages=_after_call(call.id, call.function.arguments),
            tools=[weather_tool()],
            temperature=0,
            max_tokens=60,
            stream=True,
        )
        pieces = [c.choices[0].delta.content for c in answer if c.choices and c.choices[0].delta.content]
        assert "".join(pieces) == ANSWER and len(pieces) <= 1 + len(ANSWER.encode()) // 4  # a byte is a token

        chunks = list(
            litellm.completion(
                model=f"openai/{AGENT}",
                messages=QUESTION,
                tools=[weather_tool()],
                api_base=paced.url,
                api_key="unused",
                temperature=0,
                max_tokens=120,
                stream=True,
            )
        )
        built: Any = litellm.stream_chunk_builder(chunks, messages=QUESTION)
        (got,) = built.choices[0].message.tool_calls
        assert got.function.name == "get_weather" and json.loads(got.function.arguments) == CALL_ARGS

        chat = ChatOpenAI(model=AGENT, base_url=paced.url, api_key="unused", max_tokens=120, temperature=0)
        bound = chat.bind_tools([weather_tool()])
        asked = AIMessageChunk(content="")
        for chunk in bound.stream("What is the weather in Paris?"):
            asked += chunk
        assert [(c["name"], c["args"]) for c in asked.tool_calls] == [("get_weather", CALL_ARGS)]
        result = ToolMessage(content="sunny, 21 C", tool_call_id=asked.tool_calls[0]["id"])
        words = "".join(str(c.content) for c in bound.stream(["What is the weather in Paris?", asked, result]))
        assert words == ANSWER
    finally:
        paced.stop()


def _node_client() -> Path:
    """The pi-ai package installed from the lock file (npm's registry), once."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not (node and npm):
        pytest.fail("node and npm are needed for the pi-ai client test (.ci/run installs them)")
    if not (PIAI / "node_modules" / "@mariozechner" / "pi-ai").is_dir():
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
            cwd=PIAI,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    return PIAI / "agent.mjs"


def test_pi_ai_agent_calls_the_tool_and_answers(tool_server: client.Server) -> None:
    script = _node_client()
    done = subprocess.run(["node", str(script), tool_server.url, AGENT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    for mode in ("complete", "stream"):
        turn = report[mode]
        assert turn["error"] is None and turn["stopReason"] == "toolUse", turn
        assert [(c["name"], c["arguments"]) for c in turn["calls"]] == [("get_weather", CALL_ARGS)], turn
        assert turn["finalStopReason"] == "stop" and turn["finalText"] == ANSWER, turn
    assert {"toolcall_start", "toolcall_end", "done"} <= set(report["events"]), report["events"]


def test_the_stored_tool_checkpoint_matches_its_recipe() -> None:
    """The suite serves the stored fit (tests/data/toolmodel) only while its recipe is unchanged;
    otherwise every session refits it (minutes): refit and store it then."""
    from .toolmodel import STORED, recipe_hash

    stored = json.loads((STORED / "recipe.json").read_text())["recipe"]
    assert stored == recipe_hash(), "the tool model's recipe changed: run `python -m tests.serve.toolmodel`"
