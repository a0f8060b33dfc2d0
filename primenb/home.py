"""primenb's home folder (`PRIME_HOME`, default ~/.prime/agent): the run index lives there."""

from __future__ import annotations

import os
from pathlib import Path


def prime_home() -> Path:
    home = Path(os.environ.get("PRIME_HOME") or Path.home() / ".prime" / "agent")
    home.mkdir(parents=True, exist_ok=True)
    return home
