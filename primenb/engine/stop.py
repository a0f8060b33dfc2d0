"""Stop requests: SIGTERM/SIGINT or a ``RUN_DIR/STOP`` file (no torch import)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from typing import Any

from primenb.protocol.rundir import RunDir

log = logging.getLogger("primenb.engine")


class StopFlag:
    """Set by SIGTERM/SIGINT (or the ``STOP`` file); a second signal aborts at once."""

    def __init__(self, run_dir: RunDir) -> None:
        self.run_dir = run_dir
        self.requested = False
        self.reason: str | None = None
        self.triggered = False  # the trainer actually stopped early because of it
        self.on_request: Callable[[str], None] | None = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        name = signal.Signals(signum).name
        if self.requested:
            raise KeyboardInterrupt(f"second {name}: stopping without a final checkpoint")
        self.request(f"received {name}")

    def request(self, reason: str) -> None:
        if not self.requested:
            self.requested = True
            self.reason = reason
            log.warning("stop requested (%s): stopping at the next step boundary", reason)
            if self.on_request is not None:
                self.on_request(reason)

    def poll(self) -> bool:
        if not self.requested and self.run_dir.stop_requested():
            self.request("STOP file")
        return self.requested


__all__ = ["StopFlag"]
