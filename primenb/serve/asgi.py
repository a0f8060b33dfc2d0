"""The server's ASGI application: OpenAI's and vLLM's routes (`primenb.serve.app`), vLLM's token
route (`primenb.serve.generate`, built on the first), OpenAI-shaped errors, behind the guard."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from primenb.engine.serve_errors import ServeError
from primenb.serve import guard
from primenb.serve.app import ROUTES, State, api_error, http_error, internal_error
from primenb.serve.generate import ROUTES as TOKEN_ROUTES


def build_app(state: State) -> Any:
    app = Starlette(
        routes=[*ROUTES, *TOKEN_ROUTES],
        exception_handlers={HTTPException: http_error, ServeError: api_error, Exception: internal_error},
    )
    app.state.primenb = state
    return guard.Guard(app, state)


__all__ = ["build_app"]
