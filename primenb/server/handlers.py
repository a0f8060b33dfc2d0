"""The REST routes under ``/primenb/api/``; every one requires Jupyter's authentication.

========================================  ======  =================================================
route                                     method  answer
========================================  ======  =================================================
``traces?offset&limit&status&env&model&q``  GET   runs and traces, newest first, paged and filtered
``traces/ID``                             GET     one trace: headline, lineage, config, log tail
``traces/ID/metrics?cursor=N&keys=a,b``   GET     metric rows after the first N (incremental), state
``traces/ID/samples?limit=N``             GET     the latest sampled rollouts
``traces/ID/config``                      GET     the config as TOML (+ its path for the editor)
``traces/ID/stop``                        POST    ask the run to checkpoint and stop
``traces/ID/apply``                       POST    ``{steps, overrides, name}``: start a refinement
``servers``                               GET     the running ``primenb serve`` servers: URL, models, uptime
``servers/stop``                          POST    ``{pid}``: stop one of them (answers once it stopped)
========================================  ======  =================================================

Errors are JSON ``{"message": ...}`` with 400 (bad input), 404 (unknown trace), 409 (the run's
state forbids it), 500 (anything else). Work that touches files or SQLite runs in a thread, so a
slow disk never stalls the server.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import tornado.web
from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join

from primenb.errors import PrimenbError
from primenb.server import data, servers
from primenb.server import validate as V

log = logging.getLogger("primenb.server")
ID = r"(?P<trace_id>[^/]+)"


class BaseHandler(APIHandler):
    """JSON in, JSON out; PrimenbError subclasses map to HTTP statuses with their message (APIHandler
    writes every error as JSON ``{"message", "reason"}``)."""

    async def answer(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args, **kwargs))
        except V.BadRequest as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        except data.NotFound as exc:
            raise tornado.web.HTTPError(404, str(exc)) from None
        except data.Conflict as exc:
            raise tornado.web.HTTPError(409, str(exc)) from None
        except PrimenbError as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(result, allow_nan=False))

    def trace(self, raw: str) -> str:
        try:
            return V.trace_id(raw)
        except V.BadRequest as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None

    def arg(self, name: str) -> str | None:
        return self.get_query_argument(name, None)

    def checked(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except V.BadRequest as exc:
            raise tornado.web.HTTPError(400, str(exc)) from None


class TracesHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        c = self.checked
        await self.answer(
            data.list_traces,
            offset=c(V.integer, "offset", self.arg("offset"), default=0, lo=0, hi=10**9),
            limit=c(V.integer, "limit", self.arg("limit"), default=50, lo=1, hi=500),
            status=c(V.states, self.arg("status")),
            env=c(V.text, "env", self.arg("env")),
            model=c(V.text, "model", self.arg("model")),
            search=c(V.text, "q", self.arg("q")),
        )


class TraceHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, trace_id: str) -> None:
        await self.answer(data.trace_detail, self.trace(trace_id))


class MetricsHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, trace_id: str) -> None:
        tid = self.trace(trace_id)
        if self.arg("since") is not None:
            raise tornado.web.HTTPError(
                400, "since= (a step) was replaced by cursor= (a row count): steps restart in each phase"
            )
        cursor = self.checked(V.integer, "cursor", self.arg("cursor"), default=0, lo=0, hi=10**12)
        keys = self.checked(V.metric_keys, self.arg("keys"))
        await self.answer(data.metrics_after, tid, cursor, keys)


class SamplesHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, trace_id: str) -> None:
        tid = self.trace(trace_id)
        limit = self.checked(V.integer, "limit", self.arg("limit"), default=20, lo=0, hi=1000)
        await self.answer(data.samples, tid, limit)


class ConfigHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self, trace_id: str) -> None:
        root = getattr(self.settings.get("serverapp"), "root_dir", None) or self.settings.get("server_root_dir")
        await self.answer(data.config_toml, self.trace(trace_id), root)


class StopHandler(BaseHandler):
    @tornado.web.authenticated
    async def post(self, trace_id: str) -> None:
        await self.answer(data.stop, self.trace(trace_id))


class ApplyHandler(BaseHandler):
    @tornado.web.authenticated
    async def post(self, trace_id: str) -> None:
        tid = self.trace(trace_id)
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            raise tornado.web.HTTPError(400, "the body is not JSON") from None
        args = self.checked(V.apply_body, body)
        await self.answer(data.apply, tid, **args)


class ServersHandler(BaseHandler):
    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(servers.list_servers)


class ServerStopHandler(BaseHandler):
    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"{}")
        except ValueError:
            raise tornado.web.HTTPError(400, "the body is not JSON") from None
        await self.answer(servers.stop_server, self.checked(servers.stop_body, body))


ROUTES: tuple[tuple[str, type[BaseHandler]], ...] = (
    ("traces", TracesHandler),
    (f"traces/{ID}", TraceHandler),
    (f"traces/{ID}/metrics", MetricsHandler),
    (f"traces/{ID}/samples", SamplesHandler),
    (f"traces/{ID}/config", ConfigHandler),
    (f"traces/{ID}/stop", StopHandler),
    (f"traces/{ID}/apply", ApplyHandler),
    ("servers", ServersHandler),
    ("servers/stop", ServerStopHandler),
)


def setup_handlers(web_app: Any) -> None:
    base = url_path_join(web_app.settings["base_url"], "primenb", "api")
    host = ".*$"
    web_app.add_handlers(host, [(url_path_join(base, route) + "/?", handler) for route, handler in ROUTES])


__all__ = ["ROUTES", "setup_handlers"]
