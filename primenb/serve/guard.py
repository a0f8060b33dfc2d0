"""What the server checks before a route sees a request: who may ask and what they may send.

A server on loopback has no key by default, so a web page in the user's browser is the threat:
it can send a "simple" cross-site POST (a form, ``text/plain``) to ``127.0.0.1``, and through DNS
rebinding read answers under a name of its own. So: the ``Host`` must name loopback, an
``Origin``, when a browser sends one, must be this server itself, and a POST must say
``Content-Type: application/json`` (which a page cannot send cross-site without a preflight this
server never answers). Then the Bearer key when one is set, 503 while stopping, and a bounded body.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any

from starlette.responses import Response

from primenb.engine.serve_errors import ErrorKind, ServeError
from primenb.protocol import openai_api as api
from primenb.protocol.rundir import RunDir
from primenb.serve.wire import error_body

MAX_BODY = 4 << 20  # bytes of a request body: a prompt of ~1M tokens, far past any context here
# any 127/8 address (`--host 127.0.0.2` is loopback too), localhost, [::1]: never a domain name
_LOOPBACK_HOST = re.compile(r"(127(\.[0-9]{1,3}){3}|localhost|\[::1\])(:[0-9]{1,5})?")
# headers whose one value decides a refusal: sent twice, which one counts is ambiguous (a proxy may
# read the first, a dict the last: a `text/plain` POST once reached /admin/shutdown), so refused
_SINGLE = ("host", "origin", "content-type", "content-length", "authorization")
BODY_TIMEOUT_S = 30.0  # a request body that does not arrive in this time is refused (slow clients)


def _json(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> Response:
    import json

    return Response(json.dumps(body), status_code=status, media_type="application/json", headers=headers)


def _refusal(message: str, status: int, code: str | None = None) -> Response:
    return _json(error_body(message, status, None, code), status)


class Guard:
    """Pure ASGI middleware in front of the Starlette app (``state`` is the app's `State`)."""

    def __init__(self, app: Any, state: Any) -> None:
        self.app, self.state = app, state

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers") or []]
        headers = dict(raw)
        names = [k for k, _ in raw]
        twice = next((h for h in _SINGLE if names.count(h) > 1), None)
        refusal = (
            _refusal(f"The {twice!r} header was sent more than once; send it once.", 400)
            if twice is not None
            else self._refuse(scope, headers)
        )
        if refusal is None and scope.get("method") == "POST":
            body, refusal = await self._read_body(receive, headers)
            if refusal is None:
                receive = _replay(body, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refuse(self, scope: dict[str, Any], headers: dict[str, str]) -> Response | None:
        from primenb.serve.registry import is_loopback

        host = headers.get("host", "")
        if is_loopback(self.state.host) and not _names_loopback(host):
            where = f"{self.state.host}:{self.state.port}"
            return _refusal(f"Host {host[:100]!r} does not name this server; use {where}.", 403)
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{host.lower()}":
            return _refusal("Cross-origin requests are refused: this server answers only its own origin.", 403)
        if self.state.api_key:
            import hmac

            auth = headers.get("authorization", "")
            given = auth[7:] if auth[:7].lower() == "bearer " else ""
            if not hmac.compare_digest(given.encode(), self.state.api_key.encode()):
                return _refusal("Missing or wrong API key: send 'Authorization: Bearer <key>'.", 401, "invalid_api_key")
        if self.state.stopping and scope.get("path", "").startswith(api.API_ROOT + "/"):
            return _refusal("The server is stopping; start it again with %prime_serve.", 503)
        if scope.get("method") == "POST":
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return _refusal("POST bodies are JSON: send 'Content-Type: application/json'.", 415)
        return None

    async def _read_body(self, receive: Any, headers: dict[str, str]) -> tuple[bytes, Response | None]:
        limit = self.state.max_body
        too_big = _refusal(f"The request body is larger than this server takes ({limit} bytes).", 413)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return b"", too_big
        chunks, size = [], 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + BODY_TIMEOUT_S
        while True:
            try:  # a client that trickles its body (or never sends it) does not hold a slot for ever
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                return b"", _refusal(f"The request body did not arrive within {BODY_TIMEOUT_S:g} s.", 408)
            if message["type"] != "http.request":
                return b"", _refusal("The client went away.", 400)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return b"", too_big
            chunks.append(chunk)
            if not message.get("more_body"):
                return b"".join(chunks), None


def _names_loopback(host: str) -> bool:
    """Whether a ``Host`` header names this machine's loopback (any port: a port forward, an SSH
    tunnel, reach the server under another). A rebinding page's Host is its own domain name."""
    return _LOOPBACK_HOST.fullmatch(host.lower()) is not None


def _replay(body: bytes, receive: Any) -> Any:
    """A ``receive`` that gives the body read already, then waits on the client (a disconnect)."""
    sent = False

    async def again() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return dict(await receive())

    return again


def checkpoint_in_run_dir(path: str) -> Path:
    """``path`` as a checkpoint of a run directory (``RUN/checkpoints/...`` where RUN holds a status
    or a trace), after following links; anything else is refused: the admin routes load only what
    primenb trained or fetched."""
    if any(ord(ch) < 32 for ch in path):  # NUL makes realpath raise; no checkpoint path holds controls
        raise ServeError(
            "checkpoint paths may not contain control characters (NUL, newlines).", ErrorKind.INVALID, "checkpoint"
        )
    real = Path(os.path.realpath(path))
    if not real.is_dir():
        raise ServeError(f"checkpoint {path[:300]!r} is not a folder here.", ErrorKind.NOT_FOUND, "checkpoint")
    if run_dir_of(real) is not None:
        return real
    raise ServeError(
        f"checkpoint {path[:300]!r} is not inside a run directory's checkpoints/ folder; "
        "the server loads only checkpoints primenb trained or fetched.",
        ErrorKind.FORBIDDEN,
        "checkpoint",
    )


def run_dir_of(real: Path) -> Path | None:
    """The run directory whose ``checkpoints/`` folder holds ``real`` (a path with links followed):
    the nearest one that holds a status or a trace."""
    for folder in real.parents:
        if folder.name == RunDir.CHECKPOINTS:
            run = RunDir(folder.parent)
            if run.status_path.is_file() or run.trace_path.is_file():
                return folder.parent
    return None


__all__ = ["MAX_BODY", "Guard", "checkpoint_in_run_dir", "run_dir_of"]
