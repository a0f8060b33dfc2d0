"""Tool calls in a completion's text, without a model: each format parses, a reply that is not a
call stays text, and streaming gives what parsing the whole text gives, however it is split."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from primenb.engine.toolcalls import ToolCallStream, parse

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TWO = CALL + "\n" + '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'

PARSED = [
    ("hermes", CALL, None, [("get_weather", {"city": "Paris"})]),
    ("hermes", "Let me look.\n" + CALL, "Let me look.\n", [("get_weather", {"city": "Paris"})]),
    ("hermes", TWO, None, [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]),
    ("hermes", '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>', None, [("f", {"a": 1})]),
    (
        "llama3_json",
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        None,
        [("get_weather", {"city": "Paris"})],
    ),
    (
        "llama3_json",
        '<|python_tag|>{"name": "f", "parameters": {}}; {"name": "g", "arguments": {"x": 2}}',
        None,
        [("f", {}), ("g", {"x": 2})],
    ),
]


@pytest.mark.parametrize(("parser", "text", "content", "calls"), PARSED)
def test_calls_parse(parser: str, text: str, content: str | None, calls: list[tuple[str, dict]]) -> None:
    parsed = parse(text, parser)
    assert parsed.content == content
    assert [(c.name, json.loads(c.arguments)) for c in parsed.calls] == calls
    assert len({c.id for c in parsed.calls}) == len(calls)  # ids unique per call


NOT_CALLS = [
    ("hermes", "plain text"),
    ("hermes", '<tool_call>\n{"name": "f", "arguments": {}'),  # unclosed
    ("hermes", "<tool_call>not json</tool_call>"),
    ("hermes", '<tool_call>{"arguments": {}}</tool_call>'),  # no name
    ("hermes", '<tool_call>{"name": "f", "arguments": [1]}</tool_call>'),  # arguments not an object
    ("hermes", '<tool_call>{"name": "f", "arguments": {}}</tool_call> and then more'),
    ("hermes", '<tool_call>["name"]</tool_call>'),
    ("llama3_json", "The answer is {x}"),
    ("llama3_json", '{"name": "f", "parameters": {}} trailing'),
    ("llama3_json", '{"no": "name"}'),
    ("llama3_json", ""),
]


@pytest.mark.parametrize(("parser", "text"), NOT_CALLS)
def test_what_does_not_parse_stays_text(parser: str, text: str) -> None:
    parsed = parse(text, parser)
    assert parsed.calls == () and parsed.content == text


def _streamed(parser: str, pieces: list[str]) -> tuple[str, list[tuple[str, str]]]:
    stream = ToolCallStream(parser)
    sent = "".join(stream.push(p) for p in pieces)
    rest, calls = stream.close()
    return sent + rest, [(c.name, c.arguments) for c in calls]


def _whole(parser: str, text: str) -> tuple[str, list[tuple[str, str]]]:
    parsed = parse(text, parser)
    return parsed.content or "", [(c.name, c.arguments) for c in parsed.calls]


TEXTS = [t for _, t, _, _ in PARSED] + [t for _, t in NOT_CALLS] + ["a <tool_c", "<tool", "x<tool_call"]


@pytest.mark.parametrize("parser", ["hermes", "llama3_json"])
@pytest.mark.parametrize("text", TEXTS)
def test_streaming_gives_what_parsing_gives_at_every_split(parser: str, text: str) -> None:
    want = _whole(parser, text)
    for cut in range(len(text) + 1):
        assert _streamed(parser, [text[:cut], text[cut:]]) == want, cut
    assert _streamed(parser, list(text)) == want  # a character at a time


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list('<>/_tool_call{}":, namearg\n|python')), max_size=80),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
def test_streaming_matches_parsing_on_generated_text(text: str, cuts: list[int]) -> None:
    bounds = sorted({0, len(text), *[min(c, len(text)) for c in cuts]})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    for parser in ("hermes", "llama3_json"):
        assert _streamed(parser, pieces) == _whole(parser, text)


def test_content_before_a_call_streams_before_the_reply_ends() -> None:
    stream = ToolCallStream("hermes")
    assert stream.push("Let me check ") == "Let me check"  # a trailing space waits: a call may follow
    assert stream.push("the <tool") == " the "  # "<tool" may begin a call: held
    assert stream.push('_call>{"name": "f", "arguments": {}}') == ""
    assert stream.push("</tool_call>") == ""
    rest, calls = stream.close()
    assert rest == "" and [c.name for c in calls] == ["f"]
