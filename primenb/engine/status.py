"""status.json for the engine process: the per-step updates are written off the training thread.

`StatusFile.update(throttle_s=...)` (the step counters) used to write, fsync and rename the file on
the training thread once a second. Here those updates only change the fields in memory and wake a
writer thread, which writes the latest fields at most once per ``throttle_s``. Every other update
(phases, checkpoints, the final state) is written at once, in order, as before.
"""

from __future__ import annotations

import threading
from typing import Any

from primenb.protocol.rundir import RunDir, StatusFile


class EngineStatus(StatusFile):
    def __init__(self, run_dir: RunDir, *, enabled: bool = True) -> None:
        super().__init__(run_dir, enabled=enabled)
        self._lock = threading.Lock()
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._closed = False
        self._every = 1.0
        self._thread: threading.Thread | None = None

    def update(self, *, throttle_s: float = 0.0, **fields: Any) -> None:
        if not throttle_s or not self.enabled:
            with self._lock:
                super().update(**fields)
            return
        with self._lock:
            self.data.update(fields)
        self._every = throttle_s
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._write_loop, name="primenb-status", daemon=True)
            self._thread.start()
        self._dirty.set()

    def _write_loop(self) -> None:
        while not self._closed:
            self._dirty.wait()
            if self._closed:
                return
            self._dirty.clear()
            with self._lock:
                super().update()  # the latest fields, written atomically
            self._stop.wait(self._every)

    def finish(self, state: str, **fields: Any) -> None:
        self.close()
        super().finish(state, **fields)

    def close(self) -> None:
        """Stop the writer (the next plain update or `finish` writes every field)."""
        self._closed = True
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


__all__ = ["EngineStatus"]
