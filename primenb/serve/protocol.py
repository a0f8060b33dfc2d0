"""The requests the server takes, as pydantic models of OpenAI's documented fields (and vLLM's
``top_k`` and LoRA-adapter bodies). Strict: a field it does not honour is refused with a 400 that
names it, never accepted and ignored; numbers are numbers and booleans are booleans.

vLLM's sampling extras (`VLLM_EXTRAS`: ``min_p``, ``repetition_penalty``, ``min_tokens``,
``stop_token_ids``, ``skip_special_tokens``, ``include_stop_str_in_output``,
``return_tokens_as_token_ids``) are honoured on both routes, as vLLM defines them.

Each OpenAI field is in one of three groups, which `tests/serve/test_protocol.py` holds complete
against the `openai` package's own parameter types:
- honoured: it changes what the server does (sampling, stop, logprobs, echo, n, ...);
- metadata: it never changes the output by OpenAI's own definition (``user``, ``metadata``,
  cache keys), so it is accepted and not used;
- refused unless off: tools, response formats, audio, ... accepted only as null or their
  "off" value, otherwise a 400 that says the server cannot do it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, model_validator

from primenb.engine.chat import Conversation
from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import DEFAULT_SAMPLING, SEED_MAX, SEED_MIN, Sampling
from primenb.protocol.stage import FINAL, Stage

MAX_ID = 256  # characters of a model id
MAX_PROMPTS = 64  # prompts in one /v1/completions request
MAX_STOP = 4
MAX_STOP_IDS = 64  # stop_token_ids in one request
TOKEN_ID_MAX = 2**31 - 1  # a token id beyond any vocabulary (ids outside this one are refused or never sampled)
COMPLETIONS_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions
# what a served model id may be: a hub-style name, no spaces, quotes or URL syntax
SERVED_ID = r"^[A-Za-z0-9][A-Za-z0-9._/:+@-]*$"

Number = StrictFloat | StrictInt
StopText = Annotated[StrictStr, Field(max_length=1000)]
TokenId = Annotated[StrictInt, Field(ge=0, le=TOKEN_ID_MAX)]
StopIds = Annotated[list[TokenId], Field(max_length=MAX_STOP_IDS)]
ModelId = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)]
ServedId = Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID, pattern=SERVED_ID)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class TextPart(_Strict):
    type: Literal["text"]
    text: StrictStr


class FunctionCall(_Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=256)]
    arguments: Annotated[StrictStr, Field(max_length=1_000_000)]  # JSON text, as OpenAI sends it


class ToolCallIn(_Strict):
    """A call an assistant made, sent back in the history."""

    id: Annotated[StrictStr, Field(max_length=256)]
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: StrictStr | list[TextPart] | None = None
    name: StrictStr | None = None
    tool_calls: Annotated[list[ToolCallIn], Field(max_length=128)] | None = None  # assistant turns
    tool_call_id: Annotated[StrictStr, Field(max_length=256)] | None = None  # tool turns
    refusal: StrictStr | None = None  # what OpenAI's own replies carry; sent back as history

    @model_validator(mode="after")
    def _shape(self) -> Message:
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")
        if self.content is None and not (self.role == "assistant" and (self.tool_calls or self.refusal)):
            raise ValueError(f"a {self.role} message needs content")
        return self

    def as_dict(self) -> dict[str, Any]:
        text = self.content if isinstance(self.content, str | None) else "".join(p.text for p in self.content)
        role = "system" if self.role == "developer" else self.role  # OpenAI's newer name for system
        msg: dict[str, Any] = {"role": role, "content": text}
        if self.name:
            msg["name"] = self.name
        if self.tool_calls:
            msg["tool_calls"] = [c.model_dump() for c in self.tool_calls]
        if self.tool_call_id:
            msg["tool_call_id"] = self.tool_call_id
        return msg


class FunctionDef(_Strict):
    name: Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]
    description: Annotated[StrictStr, Field(max_length=100_000)] | None = None
    parameters: dict[StrictStr, Any] | None = None  # a JSON Schema object, given to the template as is
    strict: StrictBool | None = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Strict):
    name: Annotated[StrictStr, Field(min_length=1, max_length=64)]


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: StrictBool | None = None
    include_obfuscation: StrictBool | None = None

    @model_validator(mode="after")
    def _no_obfuscation(self) -> StreamOptions:
        if self.include_obfuscation:
            raise ValueError("include_obfuscation is not supported by this server: leave it unset")
        return self


class ResponseFormat(BaseModel):
    """Parsed loosely so that a JSON mode gets the 400 that names it, not a schema error."""

    model_config = ConfigDict(extra="allow")
    type: Literal["text", "json_object", "json_schema"]


def _off(value: Any) -> bool:
    return value is None or value == [] or value == {} or value is False


# vLLM's extra sampling fields, honoured on /v1/chat/completions and /v1/completions as vLLM does
VLLM_EXTRAS = (
    "top_k",
    "ignore_eos",
    "min_p",
    "repetition_penalty",
    "min_tokens",
    "stop_token_ids",
    "skip_special_tokens",
    "include_stop_str_in_output",
    "return_tokens_as_token_ids",
)


MAX_BIAS = 1024  # logit_bias entries: each costs work on every decode step of its row
_TOKEN_ID = re.compile(r"[0-9]{1,9}")  # ASCII digits only: "²".isdigit() is true and int("²") fails


def token_bias(bias: dict[str, float | int] | None, param: str = "logit_bias") -> dict[int, float]:
    """``logit_bias`` as token id -> bias (JSON object keys are strings of digits). Whether the ids
    are in the model's vocabulary is checked when the request is admitted (the scheduler knows it)."""
    if bias and len(bias) > MAX_BIAS:
        raise ServeError(f"{param} has {len(bias)} entries; at most {MAX_BIAS} are taken.", ErrorKind.INVALID, param)
    out: dict[int, float] = {}
    for key, value in (bias or {}).items():
        if not _TOKEN_ID.fullmatch(key):
            raise ServeError(f"{param} keys are token ids (digits 0-9); got {key[:40]!r}.", ErrorKind.INVALID, param)
        out[int(key)] = float(value)
    return out


def check_min_tokens(min_tokens: int | None, max_tokens: int | None, param: str = "min_tokens") -> int:
    """vLLM's rule: ``min_tokens`` may not exceed ``max_tokens``."""
    if min_tokens and max_tokens is not None and min_tokens > max_tokens:
        raise ServeError(
            f"min_tokens ({min_tokens}) must be at most max_tokens ({max_tokens}).", ErrorKind.INVALID, param
        )
    return min_tokens or 0


class _Common(_Strict):
    model: ModelId
    temperature: Annotated[Number, Field(ge=0, le=2)] | None = None
    top_p: Annotated[Number, Field(ge=0, le=1)] | None = None
    top_k: Annotated[StrictInt, Field(ge=-1)] | None = None  # vLLM's extension; -1 and 0 mean off
    ignore_eos: StrictBool | None = None  # vLLM's extension: always decode max_tokens (benchmarks)
    n: Annotated[StrictInt, Field(ge=1, le=128)] | None = None
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_STOP)] | None = None
    seed: Annotated[StrictInt, Field(ge=SEED_MIN, le=SEED_MAX)] | None = None
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    presence_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    frequency_penalty: Annotated[Number, Field(ge=-2, le=2)] | None = None
    logit_bias: dict[StrictStr, Annotated[Number, Field(ge=-100, le=100)]] | None = None
    # vLLM's sampling extras (VLLM_EXTRAS)
    min_p: Annotated[Number, Field(ge=0, le=1)] | None = None
    repetition_penalty: Annotated[Number, Field(ge=0.01, le=100)] | None = None
    min_tokens: Annotated[StrictInt, Field(ge=0)] | None = None
    stop_token_ids: StopIds | None = None
    skip_special_tokens: StrictBool | None = None
    include_stop_str_in_output: StrictBool | None = None
    return_tokens_as_token_ids: StrictBool | None = None
    # metadata: never changes the output, by OpenAI's own definition
    user: StrictStr | None = None

    @model_validator(mode="after")
    def _stream_options_need_stream(self) -> _Common:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    def _sampling(self, max_tokens: int | None, **extra: Any) -> Sampling:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        min_tokens = check_min_tokens(self.min_tokens, max_tokens)
        return Sampling(
            max_tokens=max_tokens,
            temperature=DEFAULT_SAMPLING.temperature if self.temperature is None else float(self.temperature),
            top_p=DEFAULT_SAMPLING.top_p if self.top_p is None else float(self.top_p),
            top_k=DEFAULT_SAMPLING.top_k if self.top_k is None else max(0, self.top_k),
            presence_penalty=DEFAULT_SAMPLING.presence_penalty
            if self.presence_penalty is None
            else float(self.presence_penalty),
            frequency_penalty=DEFAULT_SAMPLING.frequency_penalty
            if self.frequency_penalty is None
            else float(self.frequency_penalty),
            logit_bias=token_bias(self.logit_bias),
            stop=tuple(s for s in stop if s),
            seed=self.seed,
            n=self.n or DEFAULT_SAMPLING.n,
            ignore_eos=bool(self.ignore_eos),
            min_p=DEFAULT_SAMPLING.min_p if self.min_p is None else float(self.min_p),
            repetition_penalty=DEFAULT_SAMPLING.repetition_penalty
            if self.repetition_penalty is None
            else float(self.repetition_penalty),
            min_tokens=min_tokens,
            stop_token_ids=tuple(self.stop_token_ids or ()),
            skip_special_tokens=self.skip_special_tokens is not False,
            include_stop_str_in_output=bool(self.include_stop_str_in_output),
            tokens_as_ids=bool(self.return_tokens_as_token_ids),
            **extra,
        )

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


# Chat fields the server cannot honour: each is accepted only as null (or its "off" value).
CHAT_REFUSED = {
    "functions": "the legacy function calling (send 'tools' instead)",
    "function_call": "the legacy function calling (send 'tool_choice' instead)",
    "audio": "audio output",
    "modalities": "output modalities other than text",
    "prediction": "predicted outputs",
    "web_search_options": "web search",
    "reasoning_effort": "reasoning effort",
    "verbosity": "verbosity",
    "moderation": "moderation",
    "prompt_cache_options": "prompt cache options",
    "prompt_cache_retention": "prompt cache retention",
    "store": "storing completions",
    "service_tier": "service tiers",
}
# ... and what each field's "off" value is, besides null
_CHAT_OFF: dict[str, tuple[Any, ...]] = {
    "function_call": ("none",),
    "modalities": (["text"],),
    "store": (False,),
    "service_tier": ("auto", "default"),
}
CHAT_METADATA = ("user", "metadata", "prompt_cache_key", "safety_identifier")
VLLM_CHAT_EXTRAS = ("add_generation_prompt", "chat_template_kwargs")  # vLLM's rendering switches
MAX_TOOLS = 128
# apply_chat_template's own parameters: a request's chat_template_kwargs may not set them (a
# "chat_template" key would render a template the client wrote; vLLM allows that only when asked)
TEMPLATE_RESERVED = frozenset(
    {
        "chat_template",
        "conversation",
        "messages",
        "tools",
        "documents",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
        "processor_kwargs",
    }
)
MAX_TEMPLATE_KWARGS = 32


class ChatRequest(_Common):
    messages: Annotated[list[Message], Field(min_length=1)]
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    logprobs: StrictBool | None = None
    top_logprobs: Annotated[StrictInt, Field(ge=0, le=20)] | None = None
    response_format: ResponseFormat | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    prompt_cache_key: StrictStr | None = None
    safety_identifier: StrictStr | None = None
    tools: Annotated[list[Tool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: StrictBool | None = None
    # vLLM's rendering switches
    add_generation_prompt: StrictBool = True
    chat_template_kwargs: Annotated[dict[StrictStr, Any], Field(max_length=MAX_TEMPLATE_KWARGS)] | None = None
    functions: Any = None
    function_call: Any = None
    audio: Any = None
    modalities: Any = None
    prediction: Any = None
    web_search_options: Any = None
    reasoning_effort: Any = None
    verbosity: Any = None
    moderation: Any = None
    prompt_cache_options: Any = None
    prompt_cache_retention: Any = None
    store: Any = None
    service_tier: Any = None

    @model_validator(mode="after")
    def _logprobs(self) -> ChatRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @model_validator(mode="after")
    def _template_kwargs(self) -> ChatRequest:
        for key in self.chat_template_kwargs or {}:
            if not key.isidentifier() or key in TEMPLATE_RESERVED:
                raise ValueError(
                    f"chat_template_kwargs may not set {key[:60]!r}: it is not a template variable "
                    "(use the request's own fields for messages, tools and add_generation_prompt)"
                )
        return self

    @model_validator(mode="after")
    def _tool_turns_answer_calls(self) -> ChatRequest:
        """A tool message answers a call an earlier assistant message made (as OpenAI checks)."""
        made: set[str] = set()
        for i, m in enumerate(self.messages):
            made.update(c.id for c in m.tool_calls or [])
            if m.role == "tool" and m.tool_call_id not in made:
                raise ValueError(
                    f"messages[{i}] is a tool message whose tool_call_id {str(m.tool_call_id)[:60]!r} answers no "
                    "tool call of an earlier assistant message"
                )
        return self

    def refused(self) -> ServeError | None:
        if self.response_format is not None and self.response_format.type != "text":
            return ServeError(
                f"response_format {self.response_format.type!r} asks for constrained JSON decoding, which this "
                "server does not do; ask for JSON in the prompt, or leave response_format unset.",
                ErrorKind.INVALID,
                "response_format",
                "unsupported_parameter",
            )
        if self.tool_choice == "required" or isinstance(self.tool_choice, NamedToolChoice):
            return ServeError(
                "tool_choice 'required' or a named function asks for constrained decoding, which this server "
                "does not do; use 'auto' (the model decides) or 'none'.",
                ErrorKind.INVALID,
                "tool_choice",
                "unsupported_parameter",
            )
        if self.tool_choice not in (None, "none") and not self.tools:
            return ServeError("tool_choice is set but there are no tools.", ErrorKind.INVALID, "tool_choice")
        for name, what in CHAT_REFUSED.items():
            value = getattr(self, name)
            if not (_off(value) or value in _CHAT_OFF.get(name, ())):
                return ServeError(
                    f"'{name}' asks for {what}, which this server does not support (primenb serves plain "
                    "text generation); remove the field or set it to null.",
                    ErrorKind.INVALID,
                    name,
                    "unsupported_parameter",
                )
        return None

    def sampling(self) -> Sampling:
        asked = self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
        return self._sampling(asked, logprobs=bool(self.logprobs), top_logprobs=self.top_logprobs or 0)

    @property
    def tools_on(self) -> bool:
        """Whether the model is shown the tools and its reply parsed for calls."""
        return bool(self.tools) and self.tool_choice != "none"

    def conversation(self) -> Conversation:
        tools = [t.model_dump(exclude_none=True) for t in self.tools or []] if self.tools_on else None
        return Conversation(
            [m.as_dict() for m in self.messages],
            tools=tools,
            add_generation_prompt=self.add_generation_prompt,
            template_kwargs=self.chat_template_kwargs,
        )


TokenIds = Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(min_length=1)]


class CompletionRequest(_Common):
    prompt: (
        StrictStr
        | Annotated[list[StrictStr], Field(min_length=1, max_length=MAX_PROMPTS)]
        | TokenIds
        | Annotated[list[TokenIds], Field(min_length=1, max_length=MAX_PROMPTS)]
    )
    max_tokens: Annotated[StrictInt, Field(ge=0)] | None = None
    logprobs: Annotated[StrictInt, Field(ge=0, le=5)] | None = None
    echo: StrictBool | None = None
    best_of: Annotated[StrictInt, Field(ge=1)] | None = None
    suffix: StrictStr | None = None

    @model_validator(mode="after")
    def _checks(self) -> CompletionRequest:
        if self.max_tokens == 0 and not self.echo:
            raise ValueError("max_tokens 0 only makes sense with echo: true (the prompt's own logprobs)")
        return self

    def refused(self) -> ServeError | None:
        if self.suffix:
            return ServeError("'suffix' (insertion) is not supported by this server.", ErrorKind.INVALID, "suffix")
        if self.best_of is not None and self.best_of != (self.n or DEFAULT_SAMPLING.n):
            return ServeError("'best_of' other than n is not supported by this server.", ErrorKind.INVALID, "best_of")
        return None

    def sampling(self) -> Sampling:
        asked = COMPLETIONS_MAX_TOKENS if self.max_tokens is None else self.max_tokens
        wants = self.logprobs is not None
        return self._sampling(asked, logprobs=wants, top_logprobs=self.logprobs or 0, echo=bool(self.echo))

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class AddModel(_Strict):
    """``POST /admin/models``: serve a checkpoint (from a run directory) under ``id``."""

    id: ServedId
    checkpoint: Annotated[StrictStr, Field(min_length=1, max_length=4096)]
    model_name: ModelId | None = None
    seed: Annotated[StrictInt, Field(ge=0, le=2**32 - 1)] = 0
    text_template: Annotated[StrictStr, Field(max_length=10_000)] | None = None
    trace: Annotated[StrictStr, Field(max_length=64)] | None = None
    trace_name: Annotated[StrictStr, Field(max_length=MAX_ID)] | None = None
    parent: ModelId | None = None
    stage: Stage = FINAL  # a trace's own model, or the warm-up it was trained on
    kind: Literal["checkpoint"] = "checkpoint"


class LoadLora(_Strict):
    """vLLM's ``POST /v1/load_lora_adapter`` body."""

    lora_name: ServedId
    lora_path: Annotated[StrictStr, Field(min_length=1, max_length=4096)]
    load_inplace: StrictBool | None = None


class UnloadLora(_Strict):
    """vLLM's ``POST /v1/unload_lora_adapter`` body."""

    lora_name: ModelId
    lora_int_id: StrictInt | None = None


__all__ = [
    "CHAT_METADATA",
    "CHAT_REFUSED",
    "MAX_ID",
    "VLLM_CHAT_EXTRAS",
    "VLLM_EXTRAS",
    "AddModel",
    "ChatRequest",
    "CompletionRequest",
    "LoadLora",
    "Message",
    "Tool",
    "UnloadLora",
]
