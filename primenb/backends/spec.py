"""Where a run goes, written down: backend URLs and the named backends saved under the primenb home.

``local`` | ``ssh://[user@]host[:port][/workdir]`` | ``slurm://`` | ``slurm://login-host[/workdir]``

Options (``KEY=VALUE``, e.g. ``python=/opt/venv/bin/python env=HF_TOKEN,WANDB_API_KEY``) are saved
with a name, never values: ``env`` lists variable *names* whose values are read from the
notebook's environment at submit time and sent over the SSH channel's stdin, never to a file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from primenb.backends.registry import BACKENDS, SAVED, SCHEMES
from primenb.backends.specdoc import ENV_NAME_RE, BackendSpec, BackendSpecError, check_env_name
from primenb.fsutil import atomic_write_json

KINDS = SAVED  # what a spec may be: a bare kind (``local``) or a URL's scheme
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9._-]{0,63}$")
RESERVED = tuple(BACKENDS)  # a saved name may not hide a backend's own


def parse_url(url: str) -> BackendSpec:
    """``ssh://user@host:22/abs/dir`` (``/~/dir`` for a folder under the remote home), ``slurm://``."""
    if url in KINDS and url not in SCHEMES:  # a bare kind is its whole URL
        return BackendSpec(url)
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES:
        raise BackendSpecError(
            f"{url!r} is not a backend URL: use local, ssh://[user@]host[:port][/workdir], slurm:// "
            "or slurm://login-host, or the name of a backend saved with %prime_backend add"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise BackendSpecError(f"{url!r}: bad port ({exc})") from None
    host = parts.hostname
    if parts.scheme == "ssh" and not host:
        raise BackendSpecError(f"{url!r} names no host: use ssh://[user@]host[:port][/workdir]")
    from primenb.backends.sshconn import SSHError, check_destination

    user = unquote(parts.username) if parts.username is not None else None
    if host or user is not None:
        try:
            check_destination(host, user)
        except SSHError as exc:
            raise BackendSpecError(f"{url!r}: {exc}") from None
    path = unquote(parts.path)
    workdir = None
    if path not in ("", "/"):
        workdir = path[3:] if path.startswith("/~/") else path
    return BackendSpec(parts.scheme, host=host, user=user, port=port, workdir=workdir)


_LIST_OPTIONS = ("env", "ssh_args", "sbatch_args")


def apply_options(spec: BackendSpec, options: list[str]) -> BackendSpec:
    """``KEY=VALUE`` options onto ``spec``: python, workdir, env (comma separated), ssh_args and
    sbatch_args (shell words), request_gpus (true/false), connect_timeout."""
    import shlex

    allowed = ("python", "workdir", "env", "ssh_args", "sbatch_args", "request_gpus", "connect_timeout")
    for option in options:
        key, sep, value = option.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in allowed:
            raise BackendSpecError(f"bad option {option!r}: use KEY=VALUE with KEY one of {', '.join(allowed)}")
        if key == "env":
            spec.env = [v.strip() for v in value.split(",") if v.strip()]
            for entry in spec.env:
                check_env_name(entry)
        elif key in _LIST_OPTIONS:
            setattr(spec, key, shlex.split(value))
        elif key == "request_gpus":
            spec.request_gpus = value.strip().lower() in ("1", "true", "yes", "on")
        elif key == "connect_timeout":
            spec.connect_timeout = int(value)
        else:
            setattr(spec, key, value)
    return spec


# -- the named-backend store: $PRIME_HOME/backends/<name>.json --------------------------------


def _root() -> Path:
    from primenb.home import prime_home

    return prime_home() / "backends"


def add(name: str, url: str, options: list[str] | None = None, *, force: bool = False) -> BackendSpec:
    if not NAME_RE.match(name) or name in RESERVED:
        raise BackendSpecError(
            f"{name!r} cannot name a backend: use letters, digits, '.', '_' and '-', starting with a "
            f"letter, and not one of {', '.join(RESERVED)}"
        )
    spec = apply_options(parse_url(url), options or [])
    spec.name = name
    path = _root() / f"{name}.json"
    if path.exists() and not force:
        raise BackendSpecError(f"a backend named {name!r} exists ({path}); pass --force to replace it")
    atomic_write_json(path, spec.to_json())
    return spec


def load(name: str) -> BackendSpec | None:
    if not NAME_RE.match(name):
        return None
    try:
        return BackendSpec.from_json(json.loads((_root() / f"{name}.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def names() -> list[str]:
    root = _root()
    return sorted(p.stem for p in root.glob("*.json")) if root.is_dir() else []


def list_specs() -> list[BackendSpec]:
    return [s for s in (load(n) for n in names()) if s is not None]


def remove(name: str) -> BackendSpec:
    spec = load(name)
    if spec is None:
        raise BackendSpecError(f"no backend named {name!r} (saved: {', '.join(names()) or 'none'})")
    (_root() / f"{name}.json").unlink()
    return spec


def resolve(name_or_url: str) -> BackendSpec:
    """A saved name, a URL, or a bare kind a spec may be (`KINDS`: ``local``, ``ssh``, ``slurm``)."""
    if name_or_url in KINDS:
        return BackendSpec(name_or_url)
    if "://" in name_or_url:
        return parse_url(name_or_url)
    spec = load(name_or_url)
    if spec is None:
        raise BackendSpecError(
            f"no backend named {name_or_url!r}: use local, an ssh:// or slurm:// URL, or a saved name "
            f"({', '.join(names()) or 'none saved yet: %prime_backend add NAME URL'})"
        )
    return spec


__all__ = [
    "ENV_NAME_RE",
    "KINDS",
    "RESERVED",
    "BackendSpec",
    "BackendSpecError",
    "add",
    "apply_options",
    "check_env_name",
    "list_specs",
    "load",
    "parse_url",
    "remove",
]
