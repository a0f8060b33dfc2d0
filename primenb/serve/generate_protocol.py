"""vLLM's token route, ``POST /inference/v1/generate``: its request as pydantic models, strict like the
OpenAI ones (`primenb.serve.protocol`). Token ids in, token ids and their log-probabilities out;
what `renderers.client.generate` (verifiers' training client) sends.

Each field of vLLM's ``GenerateRequest`` and ``SamplingParams`` is in one of three groups, which
`tests/serve/test_protocol.py` holds complete against vLLM's field lists:
- honoured: it changes what the server does;
- metadata: it cannot change the answer here (``cache_salt``: there is no prefix cache to salt;
  ``output_kind``: how vLLM's engine hands out partial results; the render step's byproducts);
- refused unless off: multimodal inputs, structured outputs, prompt logprobs, ... accepted only
  as null or their "off" value, otherwise a 400 that names the field (``unsupported_parameter``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StrictBool, StrictInt, StrictStr

from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import DEFAULT_SAMPLING, SEED_MAX, SEED_MIN, Sampling
from primenb.serve.protocol import (
    MAX_ID,
    ModelId,
    Number,
    StopIds,
    StopText,
    TokenId,
    _off,
    _Strict,
    check_min_tokens,
    token_bias,
)

MAX_GENERATE_STOP = 16
MAX_LOGPROBS = 20  # vLLM's default --max-logprobs

# SamplingParams fields that change what the server does
SAMPLING_HONOURED = (
    "n",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "max_tokens",
    "min_tokens",
    "logprobs",
    "skip_special_tokens",  # the text stop strings are looked for in
    "include_stop_str_in_output",
    "logit_bias",
)
# SamplingParams fields accepted only as null (or their "off" value), and why
SAMPLING_REFUSED = {
    "prompt_logprobs": "prompt log-probabilities (use /v1/completions with echo and logprobs)",
    "prompt_logprob_token_ids": "prompt log-probabilities",
    "prompt_logprob_start": "prompt log-probabilities",
    "logprob_token_ids": "log-probabilities of chosen token ids",
    "allowed_token_ids": "allowed token ids",
    "bad_words": "bad words",
    "structured_outputs": "structured outputs",
    "guided_decoding": "structured outputs",
    "logits_processors": "logits processors",
    "extra_args": "custom sampler arguments",
    "thinking_token_budget": "a thinking token budget",
    "repetition_detection": "repetition detection",
    "trace_decode_token_ids": "forced decoding",
    "truncate_prompt_tokens": "prompt truncation",
    "spaces_between_special_tokens": "text without spaces between special tokens",
}
_SAMPLING_OFF: dict[str, tuple[Any, ...]] = {
    "thinking_token_budget": (-1,),
    "spaces_between_special_tokens": (True,),
}
# SamplingParams fields that cannot change this route's answer
SAMPLING_METADATA = (
    "detokenize",  # the route returns token ids, never text
    "output_kind",  # how vLLM's engine hands out partial results
    "stream_interval",
    "flat_logprobs",  # vLLM's internal layout of the same numbers
    "skip_clone",
    "skip_reading_prefix_cache",  # there is no prefix cache
    "routed_experts_prompt_start",  # routed experts are never returned (no mixture of experts here)
)

GENERATE_HONOURED = ("token_ids", "sampling_params", "model", "request_id")
# GenerateRequest fields accepted only as null (or their "off" value), and why
GENERATE_REFUSED = {
    "features": "multimodal inputs",
    "content_parts": "multimodal inputs",
    "stream": "streaming on this route (use /v1/completions with token ids to stream)",
    "stream_options": "streaming on this route",
    "kv_transfer_params": "disaggregated serving (KV transfer)",
    "ec_transfer_params": "disaggregated serving (encoder-cache transfer)",
    "priority": "priority scheduling (requests are served first come, first served)",
}
_GENERATE_OFF: dict[str, tuple[Any, ...]] = {"priority": (0,)}
# GenerateRequest fields that cannot change the answer
GENERATE_METADATA = (
    "cache_salt",  # there is no prefix cache to salt
    "return_token_ids",  # prompt_token_ids are always returned
    "assistant_tokens_mask",  # the render step's byproducts, carried along
    "token_offsets",
)


def _refusal(owner: Any, table: dict[str, str], off: dict[str, tuple[Any, ...]], where: str) -> ServeError | None:
    for name, what in table.items():
        value = getattr(owner, name)
        if not (_off(value) or value in off.get(name, ())):
            return ServeError(
                f"'{where}{name}' asks for {what}, which this server does not support; remove the field or "
                "set it to null.",
                ErrorKind.INVALID,
                f"{where}{name}",
                "unsupported_parameter",
            )
    return None


class GenerateSampling(_Strict):
    """vLLM's ``SamplingParams`` as JSON. Defaults are vLLM's, except ``max_tokens``: left out, it is
    the context left (vLLM's server-side default on this route)."""

    n: Annotated[StrictInt, Field(ge=1, le=128)] = DEFAULT_SAMPLING.n
    presence_penalty: Annotated[Number, Field(ge=-2, le=2)] = DEFAULT_SAMPLING.presence_penalty
    frequency_penalty: Annotated[Number, Field(ge=-2, le=2)] = DEFAULT_SAMPLING.frequency_penalty
    repetition_penalty: Annotated[Number, Field(ge=0.01, le=100)] = DEFAULT_SAMPLING.repetition_penalty
    temperature: Annotated[Number, Field(ge=0, le=100)] = DEFAULT_SAMPLING.temperature
    top_p: Annotated[Number, Field(gt=0, le=1)] = DEFAULT_SAMPLING.top_p
    top_k: Annotated[StrictInt, Field(ge=-1)] = DEFAULT_SAMPLING.top_k
    min_p: Annotated[Number, Field(ge=0, le=1)] = DEFAULT_SAMPLING.min_p
    seed: Annotated[StrictInt, Field(ge=SEED_MIN, le=SEED_MAX)] | None = None
    stop: StopText | Annotated[list[StopText], Field(max_length=MAX_GENERATE_STOP)] | None = None
    stop_token_ids: StopIds | None = None
    ignore_eos: StrictBool = DEFAULT_SAMPLING.ignore_eos
    max_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    min_tokens: Annotated[StrictInt, Field(ge=0)] = DEFAULT_SAMPLING.min_tokens
    logprobs: Annotated[StrictInt, Field(ge=0, le=MAX_LOGPROBS)] | None = None
    skip_special_tokens: StrictBool = DEFAULT_SAMPLING.skip_special_tokens
    include_stop_str_in_output: StrictBool = DEFAULT_SAMPLING.include_stop_str_in_output
    logit_bias: dict[StrictStr, Annotated[Number, Field(ge=-100, le=100)]] | None = None
    # metadata (SAMPLING_METADATA)
    detokenize: StrictBool = True
    output_kind: Annotated[StrictInt, Field(ge=0, le=2)] | None = None  # vLLM's RequestOutputKind
    stream_interval: Annotated[StrictInt, Field(ge=1)] | None = None
    flat_logprobs: StrictBool = False
    skip_clone: StrictBool = False
    skip_reading_prefix_cache: StrictBool | None = None
    routed_experts_prompt_start: Annotated[StrictInt, Field(ge=0)] = 0
    # refused unless off (SAMPLING_REFUSED)
    prompt_logprobs: Any = None
    prompt_logprob_token_ids: Any = None
    prompt_logprob_start: Any = None
    logprob_token_ids: Any = None
    allowed_token_ids: Any = None
    bad_words: Any = None
    structured_outputs: Any = None
    guided_decoding: Any = None
    logits_processors: Any = None
    extra_args: Any = None
    thinking_token_budget: Any = None
    repetition_detection: Any = None
    trace_decode_token_ids: Any = None
    truncate_prompt_tokens: Any = None
    spaces_between_special_tokens: Any = None

    def sampling(self) -> Sampling:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        p = "sampling_params."
        return Sampling(
            max_tokens=self.max_tokens,
            temperature=float(self.temperature),
            top_p=float(self.top_p),
            top_k=max(0, self.top_k),
            presence_penalty=float(self.presence_penalty),
            frequency_penalty=float(self.frequency_penalty),
            logit_bias=token_bias(self.logit_bias, p + "logit_bias"),
            stop=tuple(s for s in stop if s),
            seed=self.seed,
            n=self.n,
            logprobs=self.logprobs is not None,
            top_logprobs=self.logprobs or 0,
            ignore_eos=self.ignore_eos,
            min_p=float(self.min_p),
            repetition_penalty=float(self.repetition_penalty),
            min_tokens=check_min_tokens(self.min_tokens, self.max_tokens, p + "min_tokens"),
            stop_token_ids=tuple(self.stop_token_ids or ()),
            skip_special_tokens=self.skip_special_tokens,
            include_stop_str_in_output=self.include_stop_str_in_output,
            tokens_as_ids=True,  # this route names tokens by id (vLLM's "token_id:N")
        )


class GenerateRequest(_Strict):
    """vLLM's ``GenerateRequest``: ``token_ids`` (the rendered prompt) and ``sampling_params``."""

    token_ids: Annotated[list[TokenId], Field(min_length=1)]
    sampling_params: GenerateSampling
    model: ModelId | None = None  # left out: the one model served (a 400 when there are several)
    request_id: Annotated[StrictStr, Field(min_length=1, max_length=MAX_ID)] | None = None
    # metadata (GENERATE_METADATA)
    cache_salt: Annotated[StrictStr, Field(max_length=1024)] | None = None
    return_token_ids: StrictBool | None = None
    assistant_tokens_mask: list[StrictInt] | None = None
    token_offsets: list[tuple[StrictInt, StrictInt]] | None = None
    # refused unless off (GENERATE_REFUSED)
    features: Any = None
    content_parts: Any = None
    stream: Any = None
    stream_options: Any = None
    kv_transfer_params: Any = None
    ec_transfer_params: Any = None
    priority: Any = None

    def refused(self) -> ServeError | None:
        return _refusal(self, GENERATE_REFUSED, _GENERATE_OFF, "") or _refusal(
            self.sampling_params, SAMPLING_REFUSED, _SAMPLING_OFF, "sampling_params."
        )

    def sampling(self) -> Sampling:
        return self.sampling_params.sampling()


__all__ = [
    "GENERATE_HONOURED",
    "GENERATE_METADATA",
    "GENERATE_REFUSED",
    "SAMPLING_HONOURED",
    "SAMPLING_METADATA",
    "SAMPLING_REFUSED",
    "GenerateRequest",
    "GenerateSampling",
]
