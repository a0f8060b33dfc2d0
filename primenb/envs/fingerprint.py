"""Data hashes of an environment: what a trace records so two runs can be told to use the same data.

`data_fingerprint(env)` gives the environment's id, version and arguments, and a SHA-256 over
the canonical JSON serialization (UTF-8, as `primenb.protocol.hashing` defines it and traces
record it) of its train rows and, separately, of its eval rows (keys
sorted, no whitespace, non-JSON values by ``str``). Same id + arguments (+ seed) -> same hashes;
changing any argument that changes the rows changes them.
"""

from __future__ import annotations

import json
from typing import Any

from primenb.envs.base import Environment, Row
from primenb.protocol import hashing


def rows_hash(rows: list[Row]) -> str:
    """The data hash traces record (`primenb.protocol.hashing.rows_hash`), without the count."""
    return hashing.rows_hash(rows)[0]


def data_fingerprint(env: Environment, env_id: str | None = None) -> dict[str, Any]:
    """``{id, version, args, train_hash, eval_hash, num_train, num_eval}`` (eval rows are the
    train rows when the environment has no held-out split, and then hash the same)."""
    train = env.train_rows()
    evals = env.eval_rows()
    return {
        "id": env_id or env.id,
        "version": env.version,
        "args": json.loads(json.dumps(env.args, sort_keys=True, default=str)),
        "train_hash": rows_hash(train),
        "eval_hash": rows_hash(evals),
        "num_train": len(train),
        "num_eval": len(evals),
    }


__all__ = ["data_fingerprint", "rows_hash"]
