"""The ``lookup`` tool of ``lookup-code``: an MCP server verifiers starts with ``python -m``, one
shared by all rollouts of an env worker (it keeps no state: a key's code is a hash of the key)."""

from __future__ import annotations

import hashlib
import string

import verifiers.v1 as vf

CODE_LEN = 4


def code_for(key: str) -> str:
    """``CODE_LEN`` lowercase letters drawn from the SHA-256 of the key: no rule a model could
    learn from the key's letters, so only the tool knows it."""
    digest = hashlib.sha256(key.strip().lower().encode()).digest()
    return "".join(string.ascii_lowercase[b % 26] for b in digest[:CODE_LEN])


class LookupToolset(vf.Toolset[vf.SharedToolsetConfig]):
    TOOL_PREFIX = None  # advertised bare, as ``lookup``

    @vf.tool
    def lookup(self, key: str) -> str:
        """The code for a key."""
        return code_for(key)


if __name__ == "__main__":
    LookupToolset.run()
