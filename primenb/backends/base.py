"""The one interface every backend implements (local, ssh, slurm, modelfactory).

A backend turns a validated `Config` into a run whose directory is readable *here*: the local
backend writes it in place; a remote backend keeps a local mirror of the remote run directory
current (`RunControl.sync`), so `Run`, the monitor, the harness and the sidebar read every
backend's runs the same way. Nothing above this layer special-cases a backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


@dataclass(frozen=True)
class Lineage:
    """Where a new run comes from: the trace it continues (`apply`) or reproduces (`rerun`)."""

    parent: str | None = None
    reproduces: str | None = None
    reproduces_run_dir: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class Backend(ABC):
    """Submit a run, and later re-open it (after a kernel restart) from its run directory."""

    name: ClassVar[str]

    @abstractmethod
    def submit(self, config: Config, *, name: str | None = None, lineage: Lineage | None = None) -> Run:
        """Start ``config`` as a new run; the queued trace records ``lineage``."""

    @abstractmethod
    def open(self, run_dir: Path) -> Run:
        """The `Run` of a run directory this backend launched (wired to follow and stop it)."""

    def fetch_artifacts(self, run: Run) -> Path:
        """Bring the final model/adapter and the trace into the local run directory; its path."""
        return run.dir


__all__ = ["Backend", "Lineage"]
