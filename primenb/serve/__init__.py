"""Serve trained models over an OpenAI-compatible HTTP API (``%prime_serve``) and evaluate them
through it (``%prime_eval``). The server runs in its own process (`primenb.serve.worker`); this
package's face (`client`) only starts, finds, changes and stops it. See docs/serve.md."""

from __future__ import annotations

from primenb.serve.client import ServeError, Server, add, find, remove, servers, start, stop, table

__all__ = ["ServeError", "Server", "add", "find", "remove", "servers", "start", "stop", "table"]
