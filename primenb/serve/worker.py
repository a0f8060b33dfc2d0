"""``python -m primenb.serve.worker SPEC.json``: the server process. Binds its socket first (a port in
use fails at once), loads the models of the spec, records itself in the registry, then serves with
uvicorn until SIGTERM, SIGINT or ``POST /admin/shutdown``.

All three run one stop: new requests get 503 (``/health`` too), rows still decoding get
``STOP_GRACE_S`` (``PRIMENB_SERVE_STOP_GRACE_S`` overrides), then end with finish reason ``abort``;
once nothing is in flight the server lingers ``STOP_LINGER_S`` answering 503, then exits and drops
its registry record. uvicorn's own signal handler would end the server at once (the port refusing,
streams cut after its graceful timeout): `StopServer` routes its signals to this stop instead."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from primenb.commands import ServeStartArgs
from primenb.engine.serve_errors import ServeError
from primenb.protocol.fields import DEFAULT_MODEL
from primenb.protocol.stage import parse_stage
from primenb.serve import registry

STOP_LINGER_S = 1.0  # after the last request: late clients get a clear 503, not a reset
STOP_GRACE_S = 1.0  # requests still decoding when stopped get this long, then end with "abort"


def grace_s() -> float:
    """How long rows decoding at a stop may go on: ``PRIMENB_SERVE_STOP_GRACE_S`` (seconds, >= 0)."""
    given = os.environ.get("PRIMENB_SERVE_STOP_GRACE_S", "")
    try:
        value = float(given)
    except ValueError:
        return STOP_GRACE_S
    return value if 0 <= value < float("inf") else STOP_GRACE_S


def load_into(pool: Any, spec: dict[str, Any]) -> Any:
    """Serve one model of a spec (the base itself, or a checkpoint)."""
    if spec.get("kind") == "base":
        return pool.add_base(spec["id"], spec["model_name"], seed=int(spec.get("seed") or 0))
    return pool.add_checkpoint(
        spec["id"],
        spec["checkpoint"],
        model_name=str(spec.get("model_name") or DEFAULT_MODEL),
        seed=int(spec.get("seed") or 0),
        text_template=spec.get("text_template"),
        trace=spec.get("trace"),
        parent=spec.get("parent"),
        stage=parse_stage(spec.get("stage")),
    )


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class StopServer(uvicorn.Server):
    """uvicorn's server whose SIGTERM/SIGINT runs the worker's stop (its watch loop decides when to
    exit) instead of ending at once; a second SIGINT (Ctrl+C twice) aborts and exits now."""

    def __init__(self, config: uvicorn.Config, scheduler: Any) -> None:
        super().__init__(config)
        self.scheduler = scheduler

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:  # uvicorn's handler for both
        if sig == signal.SIGINT and self.scheduler.stopping:
            self.scheduler.abort_all()
            self.should_exit = True
        else:
            self.scheduler.stop_admitting()  # not recorded: uvicorn re-raises what it recorded


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec_path = Path(args[0])
    spec = json.loads(spec_path.read_text())
    ready = Path(spec["ready_file"])
    host, port = str(spec.get("host") or ServeStartArgs.host), int(spec.get("port") or 0)
    key = os.environ.get(spec["api_key_var"]) if spec.get("api_key_var") else None

    def fail(message: str) -> int:
        ready.write_text(json.dumps({"error": message}))
        return 2

    if not registry.is_loopback(host) and not key:
        return fail(f"refusing to listen on {host} without an API key (set --api-key-var)")
    try:
        sock = _bind(host, port)
    except OSError as exc:
        return fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}. Pick another --port.")
    port = sock.getsockname()[1]

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from primenb.engine.batching import Scheduler
    from primenb.engine.serving import ModelPool, cpu_threads
    from primenb.serve.app import State
    from primenb.serve.asgi import build_app

    pool = ModelPool(device=os.environ.get("PRIMENB_SERVE_DEVICE") or None)  # default: the GPU if any
    if pool.device == "cpu":
        cpu_threads()
    try:
        for model in spec["models"]:
            load_into(pool, model)
    except Exception as exc:  # the caller shows this message; nothing is served
        return fail(str(exc) if isinstance(exc, ServeError) else f"{type(exc).__name__}: {exc}")

    scheduler = Scheduler(
        pool,
        max_batch=int(spec.get("max_batch") or ServeStartArgs.max_batch),
        max_queue=int(spec.get("max_queue") or ServeStartArgs.max_queue),
    )
    state = State(scheduler, api_key=key, loader=lambda s: load_into(pool, s), host=host, port=port)
    state.stream_interval = max(1, int(spec.get("stream_interval") or 1))
    state.refresh_cards()
    scheduler.start()
    app = build_app(state)

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=5)
    server = StopServer(config, scheduler)
    url = registry.api_url(host, port)
    record = {
        "pid": os.getpid(),
        "host": host,
        "port": port,
        "url": url,
        "models": list(state.cards),
        "started": time.time(),
        "api_key_var": spec.get("api_key_var"),
    }
    if key:  # lets a client tell this key from another variable a forged record names
        record["api_key_check"] = registry.key_check(key)
    registry.write(record)

    async def watch() -> None:
        grace = grace_s()
        since: float | None = None  # when the stop began
        idle: float | None = None  # since when nothing is in flight
        while not server.should_exit:
            if scheduler.stopping:
                now = time.monotonic()
                since = since or now
                if scheduler.busy:
                    idle = None
                    if now - since >= grace:
                        scheduler.abort_all()  # a stop answers in a second or two, whatever is decoding
                else:
                    idle = idle or now
                    if now - idle >= STOP_LINGER_S:  # late clients got a 503 meanwhile, not a reset
                        server.should_exit = True
            registry.update_models(os.getpid(), list(state.cards))
            await asyncio.sleep(0.1)

    async def run() -> None:
        task = asyncio.create_task(watch())
        ready.write_text(json.dumps(record))
        try:
            await server.serve(sockets=[sock])
        finally:
            task.cancel()

    logging.getLogger("uvicorn.error").setLevel(logging.WARNING)
    # a signal after uvicorn has restored the handlers (while the models close) asks the same stop:
    # Python's default would kill the process before the `finally` below drops its registry record
    # (a server on an SSH host has no one else to drop it)
    signal.signal(signal.SIGTERM, lambda *_: scheduler.stop_admitting())
    try:
        asyncio.run(run())
    finally:
        registry.remove(os.getpid())
        scheduler.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
