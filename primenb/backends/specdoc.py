"""The saved document of a backend (`BackendSpec`): what `primenb.backends.spec` parses from a URL
and keeps under a name, and what the ssh and slurm backends are built from. Apart from
`primenb.backends.spec` so that the backend classes (which `primenb.backends.registry` lists, and
`spec` reads) do not import `spec`: each fact flows one way.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from primenb.errors import PrimenbError


class BackendSpecError(PrimenbError):
    pass


@dataclass
class BackendSpec:
    """A backend and its options. Everything here is safe to write to disk (no secret values)."""

    kind: str
    host: str | None = None
    user: str | None = None
    port: int | None = None
    workdir: str | None = None  # remote folder holding run directories (default ~/primenb-runs)
    python: str | None = None  # the remote Python (a venv's bin/python); default python3
    env: list[str] = field(default_factory=list)  # variable names whose values are forwarded from here
    ssh_args: list[str] = field(default_factory=list)  # extra ssh arguments, e.g. ["-F", "~/.ssh/cfg"]
    sbatch_args: list[str] = field(default_factory=list)  # extra sbatch arguments
    request_gpus: bool = True  # slurm: ask for --gpus-per-node (off for CPU-only clusters)
    connect_timeout: int = 10
    name: str | None = None

    @property
    def url(self) -> str:
        if self.kind == "local":
            return "local"
        where = f"{self.user}@" if self.user else ""
        where += self.host or ""
        where += f":{self.port}" if self.port else ""
        where += ("" if (self.workdir or "").startswith("/") else "/~/") + self.workdir if self.workdir else ""
        return f"{self.kind}://{where}"

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, [], "")} | {"url": self.url}

    def __repr__(self) -> str:  # what `backend show` prints and a cell displays: the saved document
        import json

        return json.dumps(self.to_json(), indent=2)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BackendSpec:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}\Z")


def check_env_name(entry: str) -> str:
    """``env=`` forwards variable *names* only: a saved backend and a batch script are plain files,
    and no rule can tell which value is a credential (a URL's password, an ``hf_...`` token under
    any name), so no value is ever taken here. A name is a shell identifier, so it needs no quoting
    wherever it goes."""
    name, has_value, _ = entry.partition("=")
    if has_value:
        raise BackendSpecError(
            f"env={name}=... would save a value in the backend file: env= takes variable names only. "
            f"Set {name} in the notebook's environment (os.environ or %env {name}=...) and write "
            f"env={name}: its value is read at submit time and never saved"
        )
    if not ENV_NAME_RE.match(entry):
        raise BackendSpecError(
            f"env={entry!r} is not a variable name: use letters, digits and '_', not starting with a digit"
        )
    return entry


__all__ = ["ENV_NAME_RE", "BackendSpec", "BackendSpecError", "check_env_name"]
