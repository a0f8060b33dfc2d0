"""A process a test expects to be left alone. It writes down every catchable signal it gets, so the
test asks it what arrived (and waits for the answer) instead of sleeping a fixed time and hoping a
stray signal would have landed by then."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.polling import wait_for

# The marker has the highest number of those it catches: Python runs pending handlers in signal
# order, so a signal sent before the marker is written down before it.
MARKER = signal.SIGWINCH
CAUGHT = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, MARKER)
READY = "ready"
_CODE = f"""
import signal, sys, time
log = open(sys.argv[1], "a", buffering=1)
for number in {[int(s) for s in CAUGHT]}:
    signal.signal(number, lambda n, _: log.write(signal.Signals(n).name + "\\n"))
log.write("{READY}\\n")
while True:
    time.sleep(60)
"""


@dataclass
class Bystander:
    proc: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, log: Path, *argv: str, new_session: bool = False) -> Bystander:
        """Started with ``argv`` on its command line (what makes it look like someone else), and
        returned once its handlers are in place."""
        proc = subprocess.Popen([sys.executable, "-c", _CODE, str(log), *argv], start_new_session=new_session)
        wait_for(lambda: log.exists() and READY in log.read_text().split(), 60, "the bystander to be ready")
        return cls(proc, log)

    def signals(self) -> list[str]:
        """The signals it got so far (``["killed"]`` when it died): asked with the marker, answered
        once the marker is written down, by which time whatever was sent before it is too."""
        asked = self._lines().count(MARKER.name) + 1
        if self.proc.poll() is None:
            os.kill(self.proc.pid, MARKER)
        wait_for(lambda: self._lines().count(MARKER.name) >= asked or self.proc.poll() is not None, 60, "the marker")
        got = [line for line in self._lines() if line not in (READY, MARKER.name)]
        return got if self.proc.poll() is None else [*got, "killed"]

    def end(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=60)

    def _lines(self) -> list[str]:
        return self.log.read_text().split()
