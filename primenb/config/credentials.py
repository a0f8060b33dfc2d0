"""The secret rule on a config: no credential validates, in any mode, under any key.

It runs on the TOML as written, before migration, the schema or `--lenient` drop anything, so a
credential under an unknown key or under `[primenb]` is found like any other; and `Config`
refuses a text that holds one, so it is never written anywhere (configs/config.toml, a platform
upload, a saved cell).

Two kinds are found: a value under a secret-looking name (`HF_TOKEN`, `api_key`: the one rule,
`primenb.protocol.hashing.is_secret_name`), and a credential-shaped value under any name (a hub
token, a URL's password, the word after `--hf-token`: `limits.value_problems`). A `${VAR}`
placeholder names a variable and holds no secret: upstream accepts it and so does this rule.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from primenb.config.limits import value_problems
from primenb.config.positions import Path
from primenb.config.problem import Problem
from primenb.protocol.hashing import is_placeholder, is_secret_name  # the one secret rule


def credentials(data: Any) -> Iterator[Problem]:
    """Every credential in ``data`` (the parsed TOML), as located errors. Iterative: a deeply
    nested document cannot exhaust the stack here."""
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        at, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(key, str) and is_secret_name(key) and isinstance(value, str) and value:
                if is_placeholder(value):
                    continue
                var = _env_var(at, key, node)
                yield Problem(
                    at + (key,),
                    f"`{key}` looks like a secret; secrets never go in a config file",
                    f"remove it and export {var} in the environment that launches the run (a placeholder "
                    f'such as `{key} = "${{{var}}}"` holds no secret and is accepted)',
                    code="secret",
                )
            elif isinstance(value, (dict, list)):
                stack.append((at + (key,), value))
    for v in value_problems(data):
        if v.code == "secret":
            yield Problem(v.path, v.message, v.hint, code="secret")


def holds_credential(data: Any) -> bool:
    return next(credentials(data), None) is not None


# the variable each service's library reads, by the table a secret sits in
_SERVICE_VARS = {
    ("wandb", "api_key"): "WANDB_API_KEY",
    ("hf", "token"): "HF_TOKEN",
    ("prime", "api_key"): "PRIME_API_KEY",
}


def _env_var(at: Path, key: str, table: Any) -> str:
    """The environment variable that replaces a secret written at `at.key`: the key itself when it
    is one (`[env_vars] WANDB_API_KEY`), the table's own `<key>_var` setting (`api_key_var`), the
    service's variable (`[monitors.wandb] api_key` -> WANDB_API_KEY), else TABLE_KEY in capitals."""
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", key):
        return key
    named = table.get(f"{key}_var") if isinstance(table, dict) else None
    if isinstance(named, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", named):
        return named
    parent = next((p for p in reversed(at) if isinstance(p, str)), "")
    known = _SERVICE_VARS.get((parent, key))
    if known:
        return known
    return re.sub(r"[^A-Z0-9_]", "_", f"{parent}_{key}".upper()).strip("_") if parent else key.upper()


__all__ = ["credentials", "holds_credential", "is_placeholder"]
