"""Canonical hashing of data and configs, and redaction of secrets. Pure Python, no torch.

A data hash is the SHA-256 of the examples' canonical serialization: one JSON object per example
(keys sorted, no whitespace, UTF-8, non-JSON values as ``str``), each followed by a newline, in the
order the trainer receives them. Equal hashes mean the same examples in the same order.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# The one secret rule (config errors, trace/env-var/log redaction, sidebar answers, exports): by
# name, by shape and by place.
#
# Names: a name whose last word says it holds a credential, whatever its separators or case (the
# name is split into words first: `api-key`, `apiKey`, `X-Api-Key`, `accessToken`, `HF_TOKEN`,
# `AWS_SECRET_ACCESS_KEY`, `db.password`), and the HTTP headers that carry one (`Authorization`,
# `Proxy-Authorization`, `Cookie`, `Set-Cookie`). `max_tokens` or `api_key_var` (which names a
# variable) are not secrets.
SECRET_NAME = re.compile(
    r"(^|_)(API_?KEY|ACCESS_?KEY|PRIVATE_?KEY|SECRET(_?KEY)?|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CREDENTIALS?"
    r"|AUTHORIZATION|COOKIE)$",
    re.IGNORECASE,
)
MAX_NAME = 200  # characters of a name looked at (its end: the last word decides)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")
REDACTED = "***redacted***"
# Shapes: values that are secrets whatever their key is called (hub tokens, API keys, cloud keys,
# PEM private keys, bearer credentials)
_SECRET_VALUE = re.compile(
    r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{16,}|pk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}|npm_[A-Za-z0-9]{30,}|AIza[0-9A-Za-z_\-]{35}"
    r"|(?:sk|rk)_live_[A-Za-z0-9]{16,}"
    # a JWT can fail late (no dots after a long run): it starts only where a token starts and its
    # parts are possessive, so `eyJeyJeyJ...` is one failed attempt, not one per `eyJ` (linear)
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{20,}+\.[A-Za-z0-9_\-]{10,}+"
    r"\.[A-Za-z0-9_\-]{10,}+"
    # a PEM private key block, whole (or to the end of the text when its END line is missing)
    r"|-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----(?:[^-]|-(?!----END))*+(?:-----END[A-Z ]{0,40}PRIVATE KEY-----)?"
    # `Bearer <token>`, as an Authorization header's value
    r"|(?<![A-Za-z])[Bb]earer[ \t]+(?!\$\{)[A-Za-z0-9._~+/\-]{12,}=*)"
)

# Places: credentials that ride on innocent names: `https://user:pass@host`, `--password=...`,
# `--hf-token X`, a header line `Authorization: ...`. A `${VAR}` placeholder holds no secret.
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]{0,20}://)(?P<info>[^\s/@:]*:[^\s/@]*|[^\s/@:]+)@")
_PLACEHOLDER = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
# a flag or variable name that ENDS in a secret word (`--hf-token`, `--api-key`, `db_password`);
# `--max-num-batched-tokens` does not
_SECRET_WORD_END = re.compile(r"(?:^|[-_])(?:token|key|secret|password|passwd|pass|pwd|credentials?)$", re.I)
# candidates start only after a non-word character (the lookbehind), so scanning stays linear
_FLAG = re.compile(r"(?<![\w-])(?P<flag>--?[A-Za-z0-9][A-Za-z0-9_-]*)(?P<sep>=|[ \t]+)(?P<value>[^\s-]\S*)")
_ASSIGN = re.compile(r"(?<![\w-])(?P<flag>[A-Za-z][A-Za-z0-9_-]*)(?P<sep>=)(?P<value>[^\s&;,]+)")
# a header line as a log or an error prints it: `Authorization: Basic ...`, `Cookie: a=b; c=d`
_HEADER = re.compile(
    r"(?<![\w-])(?P<flag>(?:proxy-)?authorization|(?:set-)?cookie|x-[a-z0-9-]{0,40}(?:key|token|secret))"
    r"(?P<sep>[\"']?[ \t]*[:=][ \t]*[\"']?)(?P<value>[^\s\"'][^\r\n\"']*)",
    re.IGNORECASE,
)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rows_hash(rows: Iterable[Any]) -> tuple[str, int]:
    """``(sha256 hex, number of rows)`` over the canonical serialization of ``rows``."""
    h = hashlib.sha256()
    n = 0
    for row in rows:
        h.update(canonical_json(row).encode("utf-8"))
        h.update(b"\n")
        n += 1
    return h.hexdigest(), n


def combine(parts: Iterable[tuple[str, str]]) -> str:
    """One hash over named hashes (e.g. the sources of a run, in order)."""
    return sha256_text(canonical_json([[name, value] for name, value in parts]))


_KEY: bytes | None = None
KEY_FILE = "private_hash.key"


def private_digest(text: str) -> str:
    """HMAC-SHA256 of ``text`` under a random key kept in ``PRIME_HOME/harness/`` (created on
    first use, mode 0600). A plain SHA-256 of a short prompt can be reversed by trying every
    string; this one only by someone who also has the key. Equal texts give equal digests on
    this machine, so samples of ``data_collection = "deny"`` runs stay comparable here."""
    import hmac
    import os

    global _KEY
    if _KEY is None:
        from primenb.home import prime_home

        folder = prime_home() / "harness"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / KEY_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(os.urandom(32))
        except FileExistsError:
            pass
        for _ in range(50):  # another process may be writing it this very moment
            key = path.read_bytes()
            if len(key) == 32:
                break
            import time

            time.sleep(0.01)
        _KEY = key
    return hmac.new(_KEY, text.encode("utf-8"), hashlib.sha256).hexdigest()


# ---------------------------------------------------------------------------------------------
# secrets


def name_words(name: str) -> str:
    """``name``'s words in capitals joined by ``_`` (`apiKey`, `X-Api-Key`, `api.key` -> `API_KEY`,
    `X_API_KEY`, `API_KEY`): every spelling of a name compares as one."""
    text = str(name)[-MAX_NAME:]
    return _NOT_WORD.sub("_", _CAMEL.sub("_", text)).strip("_").upper()


def is_secret_name(name: str) -> bool:
    """Names that hold a credential (`SECRET_NAME`, any separator or case): their values are never
    stored."""
    return SECRET_NAME.search(name_words(name)) is not None


def is_placeholder(value: str) -> bool:
    """``${VAR}`` (optionally after a scheme word: ``Bearer ${TOKEN}``): names an environment
    variable and holds no secret."""
    if not isinstance(value, str) or not _PLACEHOLDER.search(value):
        return False
    rest = _PLACEHOLDER.sub("", value).strip()
    return rest in ("", "Bearer", "bearer", "Basic", "basic", "Token", "token")


def redact_text(text: str) -> str:
    """``text`` with secret-looking substrings replaced: hub tokens, API keys, PEM private keys and
    bearer credentials, the user:password of any URI (not a ``${VAR}`` one), the values of
    ``--password=X`` / ``--hf-token X`` flags, ``api_key=X`` / ``apiKey=X`` pairs and
    ``Authorization: ...`` / ``Cookie: ...`` lines. Linear time (no nested quantifiers), so a log
    line of any length is cheap."""
    if not isinstance(text, str):
        return text
    text = _SECRET_VALUE.sub(REDACTED, text)
    if "://" in text:
        text = _URL_USERINFO.sub(_hide_userinfo, text)
    if "-" in text:
        text = _FLAG.sub(_hide_value, text)
    if "=" in text:
        text = _ASSIGN.sub(_hide_value, text)
    if ":" in text or "=" in text:
        text = _HEADER.sub(_hide_header, text)
    return text


def _hide_userinfo(m: re.Match[str]) -> str:
    info = m.group("info")
    if _PLACEHOLDER.sub("", info).strip(":") == "" or info.startswith(REDACTED):
        return m.group(0)
    return f"{m.group('scheme')}{REDACTED}@"


def _hide_value(m: re.Match[str]) -> str:
    value = m.group("value")
    flag = m.group("flag").lstrip("-")
    secret = _SECRET_WORD_END.search(flag) or is_secret_name(flag)
    if not secret or value.startswith(REDACTED) or is_placeholder(value):
        return m.group(0)
    return f"{m.group('flag')}{m.group('sep')}{REDACTED}"


def _hide_header(m: re.Match[str]) -> str:
    value = m.group("value")
    if value.startswith(REDACTED) or is_placeholder(value.strip()) or not is_secret_name(m.group("flag")):
        return m.group(0)
    return f"{m.group('flag')}{m.group('sep')}{REDACTED}"


def is_secret_flag(word: str) -> bool:
    """``--hf-token`` / ``--password``: a command-line flag whose next argument is a secret."""
    return (
        isinstance(word, str)
        and word.startswith("-")
        and "=" not in word
        and bool(_SECRET_WORD_END.search(word.lstrip("-")))
    )


def has_credential(text: str) -> bool:
    """Whether ``text`` holds a secret that `redact_text` would hide."""
    return isinstance(text, str) and redact_text(text) != text


def redact(value: Any, *, key: str | None = None) -> Any:
    """A copy of a JSON-like value with secrets replaced by ``REDACTED``: string values under a
    secret-looking key, and secret-looking strings anywhere."""
    if isinstance(value, Mapping):
        return {k: redact(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # `["--hf-token", "hf_..."]`: the word after a secret flag is the secret, whatever it looks like
        out = []
        for i, v in enumerate(value):
            secret_arg = i > 0 and is_secret_flag(value[i - 1]) and isinstance(v, str)
            out.append(REDACTED if secret_arg else redact(v, key=key))
        return out
    if isinstance(value, str):
        # `api_key_var = "VLLM_API_KEY"` names a variable: not a secret, unless it looks like one
        names_a_variable = key is not None and name_words(key).endswith(("_VAR", "_ENV", "_ENV_VAR"))
        if key is not None and is_secret_name(key) and value and not names_a_variable and not is_placeholder(value):
            return REDACTED
        return redact_text(value)
    return value


def safe_env_vars(environ: Mapping[str, str], prefixes: tuple[str, ...], names: tuple[str, ...]) -> dict[str, str]:
    """The environment variables worth recording for reproducibility, never a secret one."""
    out = {}
    for name, value in environ.items():
        if is_secret_name(name):
            continue
        if name in names or name.startswith(prefixes):
            out[name] = redact_text(value)  # HF_ENDPOINT=https://user:pass@host, X_ARGS=--password=...
    return dict(sorted(out.items()))


__all__ = [
    "REDACTED",
    "canonical_json",
    "combine",
    "has_credential",
    "is_placeholder",
    "is_secret_flag",
    "is_secret_name",
    "name_words",
    "private_digest",
    "redact",
    "redact_text",
    "rows_hash",
    "safe_env_vars",
    "sha256_text",
]
