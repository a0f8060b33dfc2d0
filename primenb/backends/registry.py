"""Every backend, declared once: ``BACKENDS = {kind: class}``.

Read from here, never listed again: the kinds a URL or a saved name may name and the names a saved
backend may not take (`primenb.backends.spec`), `get_backend` and `capabilities`
(`primenb.backends`), the bare choices the config builder offers, and the config rules each
backend adds (registered below with the config layer, which may not import this one). Adding a
backend is a `Backend` subclass and its entry here.
"""

from __future__ import annotations

from primenb.backends.base import Backend
from primenb.backends.local import LocalBackend
from primenb.backends.modelfactory import ModelFactoryBackend
from primenb.backends.slurm import SlurmBackend
from primenb.backends.ssh import SSHBackend
from primenb.config.backend_rules import register

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls for cls in (LocalBackend, SSHBackend, SlurmBackend, ModelFactoryBackend)
}

SAVED = tuple(kind for kind, cls in BACKENDS.items() if cls.saved)  # what a `BackendSpec` may be
SCHEMES = tuple(kind for kind, cls in BACKENDS.items() if cls.url_scheme)  # kind://... URLs
# the bare kinds the builder offers beside the saved names: a whole place by its name alone (no
# URL to write) that launches without a price to accept (the builder's Launch asks nothing)
OFFERED = tuple(kind for kind, cls in BACKENDS.items() if not cls.url_scheme and not cls.capabilities.bills)

for _kind, _cls in BACKENDS.items():
    register(_kind, _cls.config_rules)


__all__ = ["BACKENDS", "OFFERED", "SAVED", "SCHEMES"]
