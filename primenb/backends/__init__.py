"""Where runs execute. Every backend implements `primenb.backends.base.Backend` and is listed once,
in `primenb.backends.registry`; this module picks one by name and re-opens a run with the backend
that launched it. Importing it registers every backend's config rules with the config layer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.backends.base import Backend, Capabilities, Lineage
from primenb.backends.registry import BACKENDS
from primenb.backends.spec import resolve
from primenb.errors import PrimenbError
from primenb.protocol.fields import DEFAULT_BACKEND
from primenb.protocol.rundir import RunDir

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


def get_backend(name: str, **options: Any) -> Backend:
    """The backend called ``name``: a kind (`BACKENDS`: ``local``, ``ssh``/``slurm`` re-opening
    recorded runs, ``modelfactory``, Prime Intellect's hosted training), an ``ssh://`` or
    ``slurm://`` URL, or a name saved with ``%prime_backend add``. ``options`` go to a backend built
    from launch options (`Backend.saved` false; modelfactory: gpu_type, volume, team, yes, confirm)."""
    cls = BACKENDS.get(name)
    if cls is not None and not cls.saved:  # its runs have no spec: the options say the rest
        return cls(**options)
    spec = resolve(name)
    cls = BACKENDS.get(spec.kind)
    if cls is None or not cls.saved:  # a hand-edited saved file
        raise PrimenbError(f"backend {name!r} is not available yet (available: {', '.join(BACKENDS)})")
    return cls(spec)


def backend_class(name: str | None) -> type[Backend] | None:
    """The class of the backend called ``name`` (a kind, a URL or a saved name; None: the default);
    None for a name nothing answers to."""
    name = str(name or DEFAULT_BACKEND)
    if name in BACKENDS:
        return BACKENDS[name]
    try:
        return BACKENDS.get(resolve(name).kind)
    except PrimenbError:
        return None


def serves_on_host(kind: str) -> bool:
    """Whether runs of the backend kind ``kind`` (a bare kind, never a saved name) are served on the
    host that trained them: what a server record may name as its remote backend."""
    cls = BACKENDS.get(kind)
    return cls is not None and cls.capabilities.serves_on_host


def capabilities(name: str | None) -> Capabilities:
    """What the backend called ``name`` needs from a face and what its verbs mean (see
    `Capabilities`); a saved name or URL has its kind's; an unknown name has the defaults."""
    cls = backend_class(name)
    return cls.capabilities if cls is not None else Capabilities()


def run_backend(run_dir: str | os.PathLike[str]) -> str:
    """The backend recorded for a run directory (its ``status.json``), the default when none is."""
    return str(RunDir(run_dir).read_status().get("backend") or DEFAULT_BACKEND)


def default_backend(config: Config) -> str:
    """The config's ``[primenb] backend``; a config with a ``[slurm]`` table and no backend goes to SLURM."""
    from primenb.config import TOMLDecodeError, read_toml

    try:
        written = read_toml(config.text)
    except (TOMLDecodeError, TypeError):
        written = {}
    chosen = (written.get("primenb") or {}).get("backend")
    if chosen is None and written.get("slurm") is not None:
        return "slurm"
    return str(config.settings.backend)


def submit(
    config: Config,
    *,
    name: str | None = None,
    backend: str | None = None,
    lineage: Lineage | None = None,
    options: dict[str, Any] | None = None,
) -> Run:
    """Start ``config`` on ``backend`` (default: the config's ``[primenb] backend``); ``options``
    go to a backend that declares them (`Capabilities.options`)."""
    chosen = backend or default_backend(config)
    takes = capabilities(chosen).options
    extra = {k: v for k, v in (options or {}).items() if k in takes}
    return get_backend(chosen, **extra).submit(config, name=name, lineage=lineage)


def open_run(run_dir: str | os.PathLike[str]) -> Run:
    """A run directory's `Run`, wired to the backend recorded in its status."""
    return get_backend(run_backend(run_dir)).open(Path(run_dir))


def attach(name_or_dir: str | os.PathLike[str], output_dir: str = "outputs") -> Run:
    """Re-attach to a run (e.g. after a kernel restart) by its name or directory, or a hosted
    run by its platform run id."""
    from primenb.run import find_run

    try:
        found = find_run(name_or_dir, output_dir)
    except PrimenbError:
        from primenb.backends.modelfactory import find_hosted

        hosted = find_hosted(str(name_or_dir))
        if hosted is None:
            raise
        found = hosted
    return open_run(found)


__all__ = [
    "BACKENDS",
    "Backend",
    "Capabilities",
    "Lineage",
    "attach",
    "backend_class",
    "capabilities",
    "get_backend",
    "open_run",
    "run_backend",
    "serves_on_host",
    "submit",
]
