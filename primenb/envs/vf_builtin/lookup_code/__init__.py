"""lookup-code: answer with a code only a tool knows (primenb's built-in tool-using verifiers taskset;
the embedded model learns it offline).

Each task asks "What is the code for <word>?". The code is four letters hashed from the word
(`lookup_code.servers.lookup.code_for`), so the only way to know it is the ``lookup`` tool
(`LookupToolset`, advertised bare as ``lookup``: one MCP server shared by an env worker's
rollouts). Rewards: ``looked_up`` (weight 0.2: a tool message carries the task's code) and
``answered`` (weight 0.8: that tool result reached the conversation and the final reply is exactly
the code), so a reply that guesses without the tool scores 0 and an ideal episode 1.0.
``info["ideal"]`` holds the ideal conversation (call ``lookup``, read the result, answer with it)
and ``info["tools"]`` the tools as verifiers advertises them; an SFT warm-up trains on both.

``split = "eval"`` draws its words from another seed and never repeats a word of the training
split's first ``train_tasks`` tasks (same ``seed`` and lengths).
"""

from __future__ import annotations

import asyncio
import json
import random
import string
import threading
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from .servers.lookup import LookupToolset, code_for

EVAL_SEED_OFFSET = 1_000_003


class LookupCodeConfig(vf.TasksetConfig):
    min_len: int = 3
    max_len: int = 6
    num_tasks: int = 2000
    seed: int = 0
    split: str = "train"
    """``train`` or ``eval`` (held-out words)."""
    train_tasks: int = 10_000
    """The eval split avoids every word of the training split's first ``train_tasks`` tasks."""
    tools: vf.SharedToolsetConfig = vf.SharedToolsetConfig()


class LookupCodeTaskData(vf.TaskData):
    info: dict
    """``word``, ``code``, ``ideal`` (the conversation with the right call and answer) and
    ``tools`` (the advertised tool specs)."""


def question(word: str) -> str:
    return f"What is the code for {word}?"


def looked_up(tool_messages: list[Any], code: str) -> bool:
    """A tool result in the conversation carries the code (the model asked for the right key)."""
    return any(code in _text(m.content) for m in tool_messages)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


class LookupCodeTask(vf.Task[LookupCodeTaskData]):
    @vf.reward(weight=0.2)
    async def looked_up(self, trace: vf.Trace) -> float:
        return float(looked_up(trace.tool_messages, self.data.info["code"]))

    @vf.reward(weight=0.8)
    async def answered(self, trace: vf.Trace) -> float:
        """Only what the tool said counts: the right final reply without the lookup scores 0."""
        code = self.data.info["code"]
        return float(looked_up(trace.tool_messages, code) and (trace.last_reply or "").strip() == code)

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(sum(len(m.tool_calls or []) for m in trace.assistant_messages))


def _words(config: LookupCodeConfig) -> Iterator[str]:
    if config.split not in ("train", "eval"):
        raise ValueError(f"split must be 'train' or 'eval', got {config.split!r}")
    if not 1 <= config.min_len <= config.max_len:
        raise ValueError("need 1 <= min_len <= max_len")
    held_out = config.split == "eval"
    train_words: set[str] = set()
    if held_out:  # the training split's words, so none of them is asked again
        rng = random.Random(config.seed)
        train_words = {_word(rng, config) for _ in range(config.train_tasks)}
    rng = random.Random(config.seed + (EVAL_SEED_OFFSET if held_out else 0))
    while True:
        w = _word(rng, config)
        if w not in train_words:
            yield w


def _word(rng: random.Random, config: LookupCodeConfig) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(config.min_len, config.max_len)))


def ideal_conversation(word: str) -> list[dict[str, Any]]:
    call = {"id": "call_0", "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"key": word})}}
    return [
        {"role": "user", "content": question(word)},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": code_for(word)},
        {"role": "assistant", "content": code_for(word)},
    ]


_ADVERTISED: list[dict[str, Any]] = []


def advertised_tools() -> list[dict[str, Any]]:
    """The tools as an episode's model request carries them: the toolset's MCP listing (the same
    server code verifiers launches) in the chat-completions shape its training client renders."""
    if not _ADVERTISED:
        from mcp.server.mcpserver import MCPServer

        server = MCPServer("lookup")
        LookupToolset(vf.SharedToolsetConfig()).register(server)
        listed: list[Any] = []
        # a thread of its own: load() may run inside an event loop
        thread = threading.Thread(target=lambda: listed.extend(asyncio.run(server.list_tools())))
        thread.start()
        thread.join()
        _ADVERTISED.extend(
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": _type_first(t.input_schema),
                },
            }
            for t in listed
        )
    return [json.loads(json.dumps(t)) for t in _ADVERTISED]


def _type_first(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as the episode's chat program passes it on: its MCP client's tool model puts
    ``type`` first (measured: the rendered tool block is byte for byte the episode's only so)."""
    return {"type": schema.get("type", "object"), **{k: v for k, v in schema.items() if k != "type"}}


class LookupCodeTaskset(vf.Taskset[LookupCodeTask, LookupCodeConfig]):
    @classmethod
    def toolsets(cls, config: LookupCodeConfig) -> list[vf.Toolset]:
        return [LookupToolset(config.tools)]

    def load(self) -> Iterator[LookupCodeTask]:
        c = self.config
        tools = advertised_tools()
        for idx, word in zip(range(c.num_tasks), _words(c), strict=False):
            info = {"word": word, "code": code_for(word), "ideal": ideal_conversation(word), "tools": tools}
            yield LookupCodeTask(LookupCodeTaskData(idx=idx, prompt=question(word), info=info), c.task)


__all__ = ["LookupCodeTaskset"]
