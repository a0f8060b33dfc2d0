"""Where runs execute. Every backend turns a validated Config into a run directory + a process."""

from __future__ import annotations

from typing import TYPE_CHECKING

from primenb.errors import PrimenbError

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run

BACKENDS = ("local",)


def submit(config: Config, *, name: str | None = None, backend: str | None = None) -> Run:
    backend = backend or config.settings.backend
    if backend == "local":
        from primenb.backends.local import submit as local_submit

        return local_submit(config, name=name)
    raise PrimenbError(
        f"backend {backend!r} is not available yet; use --backend local (available: {', '.join(BACKENDS)})"
    )
