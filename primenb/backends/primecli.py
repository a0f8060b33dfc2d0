"""The one place primenb runs Prime Intellect's ``prime`` CLI (PyPI ``prime``, 0.18.0 or newer).

Every call is a subprocess with ``-o json`` where the command has it, a clean environment holding
only what the CLI needs (its key, base URL, team, HOME, PATH, proxies; the two secrets it forwards
only to ``train run``/``resume``, by name), a timeout, and a retry with back-off on 429/5xx/cut
connections. The CLI prints its errors as text ("Error: API key unauthorized ..."), so the mapping
to a `PrimenbError` reads that text. The API key's value is scrubbed from everything we keep.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from primenb.errors import PrimenbError

MIN_VERSION = (0, 18, 0)
INSTALL = "pip install 'prime>=0.18'  (or: uv tool install -U prime)"
UPGRADE = "pip install -U 'prime>=0.18'  (or: uv tool upgrade prime)"
FORWARDED_SECRETS = ("WANDB_API_KEY", "HF_TOKEN")  # the only secrets `prime train run` forwards
# What the CLI reads from its environment; nothing else of the kernel's environment reaches it.
_PASSED = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "PRIME_API_KEY",
    "PRIME_API_BASE_URL",
    "PRIME_BASE_URL",
    "PRIME_FRONTEND_URL",
    "PRIME_CONTEXT",
    "PRIME_TEAM_ID",
    "PRIME_USER_ID",
    "UV_CACHE_DIR",
)


_VERSIONS: dict[tuple[str, int], tuple[int, ...]] = {}


class PrimeCLIError(PrimenbError):
    """The CLI failed in a way the user must act on; ``kind`` says which."""

    kind = "error"


class CLIMissing(PrimeCLIError):
    kind = "missing"


class AuthError(PrimeCLIError):
    kind = "unauthorized"


class BillingError(PrimeCLIError):
    kind = "payment-required"


class RunGone(PrimeCLIError):
    kind = "not-found"


class PlatformUnreachable(PrimeCLIError):
    kind = "unreachable"


class NotJSON(PrimeCLIError):
    kind = "not-json"


class PlatformRejected(PrimeCLIError):
    """A 422: the platform's own validation errors, as ``(dotted path, message)``."""

    kind = "validation"

    def __init__(self, message: str, errors: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.errors = errors


def find_prime() -> str | None:
    """The ``prime`` next to this Python (a venv a kernel runs from is often not on PATH), else PATH."""
    beside = Path(sys.executable).parent / "prime"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("prime")


def scrub(text: str, secret: str | None) -> str:
    """``text`` without the key or the CLI's own masked form of it (``abcdef...wxyz``)."""
    if not secret:
        return text
    text = text.replace(secret, "***")
    if len(secret) > 10:
        text = text.replace(f"{secret[:6]}...{secret[-4:]}", "***").replace(f"{secret[:6]}***{secret[-4:]}", "***")
    return text


def _error_lines(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("Error:"):
            return "\n".join([ln[len("Error:") :].strip(), *lines[i + 1 :]])
    return "\n".join(lines[-6:])


_VALIDATION_ROW = re.compile(r"^\s*-\s*([^:]*):\s*(.*)$")
_TRANSIENT = re.compile(r"HTTP (429|5\d\d)\b|Request failed|timed out|ConnectError|Server disconnected")


def classify(text: str, code: int, args: Sequence[str]) -> PrimeCLIError:
    """The `PrimeCLIError` for a failed CLI call, from what it printed."""
    what = "prime " + " ".join(args[:2])
    detail = _error_lines(text)
    low = text.lower()
    if "no api key configured" in low:
        return AuthError(
            f"{what}: no Prime Intellect API key is set here. Set PRIME_API_KEY in the environment that "
            "started Jupyter, or run `prime login` in a terminal (never put the key in a config or a cell)"
        )
    if "api key unauthorized" in low:
        return AuthError(
            f"{what}: the platform did not accept the API key (401). Log in again with `prime login`, or set "
            "PRIME_API_KEY in the environment that started Jupyter (never in a config or a cell)"
        )
    if "payment required" in low:
        return BillingError(
            f"{what}: the platform needs billing sorted first (402): see "
            "https://app.primeintellect.ai/dashboard/billing, or pick another team with PRIME_TEAM_ID"
        )
    if "validation failed:" in low:
        errors = [(m.group(1).strip(), m.group(2).strip()) for m in map(_VALIDATION_ROW.match, text.splitlines()) if m]
        return PlatformRejected(f"{what}: the platform rejected the config (422):\n{detail}", errors)
    if "http 404" in low or "not found" in low:
        return RunGone(f"{what}: the platform has no such run (404): it was deleted, or belongs to another team")
    if _TRANSIENT.search(text):
        return PlatformUnreachable(f"{what}: platform unreachable ({detail.splitlines()[0] if detail else code})")
    return PrimeCLIError(f"{what} failed (exit {code}): {detail or 'no output'}")


@dataclass
class PrimeCLI:
    """Runs ``prime`` with a clean environment; ``team`` becomes ``PRIME_TEAM_ID`` for these calls only."""

    executable: str | None = None
    team: str | None = None
    timeout: float = 120.0
    retries: int = 4
    backoff: float = 1.0  # seconds before the first retry; doubles, capped at 30
    on_retry: Callable[[str], None] | None = None
    env: dict[str, str] | None = None  # the environment to read from (default os.environ)
    calls: list[list[str]] = field(default_factory=list)  # every argv run (tests and the trace read it)

    def __post_init__(self) -> None:
        self.executable = self.executable or find_prime()

    # -- environment ---------------------------------------------------------------------------
    def _source(self) -> dict[str, str]:
        return dict(os.environ if self.env is None else self.env)

    @property
    def api_key(self) -> str | None:
        return self._source().get("PRIME_API_KEY") or None

    def child_env(self, *, secrets: Sequence[str] = ()) -> dict[str, str]:
        src = self._source()
        env = {k: src[k] for k in _PASSED if k in src}
        env.update({k: src[k] for k in secrets if k in FORWARDED_SECRETS and src.get(k)})
        if self.team:
            env["PRIME_TEAM_ID"] = self.team
        # plain, wide, uncoloured output: rich would wrap or colour what we parse
        env.update(NO_COLOR="1", TERM="dumb", COLUMNS="200", PYTHONIOENCODING="utf-8")
        return env

    # -- running -------------------------------------------------------------------------------
    def _exe(self) -> str:
        if not self.executable:
            raise CLIMissing(f"the `prime` CLI is not installed here; install it with: {INSTALL}")
        return self.executable

    def run(
        self, *args: str, secrets: Sequence[str] = (), timeout: float | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        argv = [self._exe(), *args]
        self.calls.append(list(args))
        try:
            proc = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=timeout or self.timeout,
                env=self.child_env(secrets=secrets),
                input=stdin if stdin is not None else "",
                errors="replace",
            )
        except FileNotFoundError:
            raise CLIMissing(f"the `prime` CLI ({argv[0]}) is gone; install it with: {INSTALL}") from None
        except subprocess.TimeoutExpired:
            raise PlatformUnreachable(
                f"prime {' '.join(args[:3])} gave no answer within {timeout or self.timeout:.0f} s"
            ) from None
        key = self.api_key
        return subprocess.CompletedProcess(proc.args, proc.returncode, scrub(proc.stdout, key), scrub(proc.stderr, key))

    def text(self, *args: str, retry: bool = True, **kw: Any) -> str:
        """Stdout of a successful call; `PrimeCLIError` otherwise (429/5xx retried with back-off)."""
        delay = self.backoff
        for attempt in range(self.retries + 1 if retry else 1):
            proc = self.run(*args, **kw)
            if proc.returncode == 0:
                return proc.stdout
            err = classify(proc.stdout + "\n" + proc.stderr, proc.returncode, args)
            if not isinstance(err, PlatformUnreachable) or attempt >= (self.retries if retry else 0):
                raise err
            if self.on_retry is not None:
                self.on_retry(f"platform unreachable, retrying in {delay:.0f} s ({err})")
            time.sleep(delay)
            delay = min(30.0, delay * 2)
        raise AssertionError("unreachable")

    def json(self, *args: str, retry: bool = True, **kw: Any) -> dict[str, Any]:
        out = self.text(*args, retry=retry, **kw)
        return parse_json(out, args)

    def version(self) -> tuple[int, ...]:
        proc = self.run("--version", timeout=30)
        m = re.search(r"(\d+)\.(\d+)\.(\d+)", proc.stdout + proc.stderr)
        if proc.returncode != 0 or not m:
            raise NotJSON(f"`prime --version` printed no version: {(proc.stdout + proc.stderr).strip()[:200]}")
        return tuple(int(x) for x in m.groups())

    def require(self) -> tuple[int, ...]:
        """The CLI's version; `CLIMissing` with the command to install or upgrade it (asked once
        per executable and modification time: each `prime` start costs about a second)."""
        exe = self._exe()
        try:
            stamp = (exe, os.stat(exe).st_mtime_ns)
        except OSError:
            raise CLIMissing(f"the `prime` CLI ({exe}) is gone; install it with: {INSTALL}") from None
        found = _VERSIONS.get(stamp) or self.version()
        _VERSIONS[stamp] = found
        if found < MIN_VERSION:
            have = ".".join(map(str, found))
            need = ".".join(map(str, MIN_VERSION))
            raise CLIMissing(f"the `prime` CLI here is {have}; primenb needs {need} or newer: {UPGRADE}")
        return found

    def has(self, *command: str) -> bool:
        """Whether ``prime COMMAND --help`` exists in this CLI (e.g. ``train validate``)."""
        return self.run(*command, "--help", timeout=30).returncode == 0


def parse_json(out: str, args: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object a CLI call printed (spinner or warning lines before it are skipped)."""
    start = out.find("{")
    try:
        data = json.loads(out[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        first = next((ln for ln in out.splitlines() if ln.strip()), "nothing")
        raise NotJSON(
            f"prime {' '.join(args[:3])} printed something that is not JSON ({first.strip()[:120]!r}); "
            f"is the `prime` CLI older or newer than primenb expects? {UPGRADE}"
        )
    return data


__all__ = [
    "FORWARDED_SECRETS",
    "INSTALL",
    "MIN_VERSION",
    "UPGRADE",
    "AuthError",
    "BillingError",
    "CLIMissing",
    "NotJSON",
    "PlatformRejected",
    "PlatformUnreachable",
    "PrimeCLI",
    "PrimeCLIError",
    "RunGone",
    "classify",
    "find_prime",
    "parse_json",
    "scrub",
]
