"""vLLM's token route, ``POST /inference/v1/generate`` (at the server's root, not under ``/v1``): token
ids in, the completion's token ids and their log-probabilities out, through the same scheduler as
the OpenAI routes (batching, per-row seeds, cancellation when the client goes away, the same 4xx
for ids outside the vocabulary and prompts longer than the context).

The answer is vLLM's ``GenerateResponse``: ``choices[].token_ids`` end with the stop token that
ended the row (the end of text, a ``stop_token_ids`` entry), as vLLM returns them and as a trainer
needs them; ``logprobs.content[].token`` is ``token_id:N``; ``prompt_token_ids`` is the prompt.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.engine.serve_requests import GenRequest
from primenb.protocol import openai_api as api
from primenb.serve.app import State, _Run, _unknown_model, cancellable, parse
from primenb.serve.generate_protocol import GenerateRequest
from primenb.serve.wire import TokenChoice, usage


def _model(state: State, asked: str | None) -> str:
    """The served id a request names; vLLM lets it be left out when one model is served."""
    if asked is None:
        if len(state.cards) == 1:
            return next(iter(state.cards))
        known = ", ".join(sorted(state.cards)) or "none"
        raise ServeError(
            f"'model' is required: this server serves several models ({known}).", ErrorKind.INVALID, "model"
        )
    if asked not in state.cards:
        raise _unknown_model(state, asked)
    return asked


async def generate(request: Request) -> Response:
    state: State = request.app.state.primenb
    body = parse(GenerateRequest, await request.body())
    refused = body.refused()
    if refused is not None:
        raise refused
    model = _model(state, body.model)
    req = GenRequest(model, list(body.token_ids), body.sampling(), param="token_ids")
    return await cancellable(request, _answer(state, body, model, req))


async def _answer(state: State, body: GenerateRequest, model: str, req: GenRequest) -> Response:
    run = _Run(state, [req])
    try:
        early = await run.admitted()
        headers = {"x-primenb-seed": str(run.seeds[0])}
        choices = [TokenChoice() for _ in range(req.sampling.n)]
        for _, event in [*early, *[x async for x in run.events()]]:
            index = getattr(event, "index", None)
            if index is not None:
                choices[index].add(event)
    finally:
        run.close()
    completion_tokens = sum(len(c.token_ids) for c in choices)
    doc: dict[str, Any] = {
        "request_id": f"generate-tokens-{body.request_id or uuid.uuid4().hex}",
        "model": model,
        "created": int(time.time()),
        "choices": [c.final(i, logprobs=req.sampling.logprobs) for i, c in enumerate(choices)],
        "usage": usage(run.prompt_tokens, completion_tokens),
        "prompt_token_ids": list(body.token_ids),
        "prompt_logprobs": None,
        "kv_transfer_params": None,
    }
    return JSONResponse(doc, headers=headers)


ROUTES = [Route(api.GENERATE, generate, methods=["POST"])]

__all__ = ["ROUTES", "generate"]
