"""Coroutines run from plain calls: the eval paths and verifiers episodes are called from magics and
the CLI alike, inside a running (Jupyter) event loop or not."""

from __future__ import annotations

import asyncio
from typing import Any


def run_async(coro: Any) -> Any:
    """Run a coroutine from a plain call, also inside a running (Jupyter) event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


__all__ = ["run_async"]
