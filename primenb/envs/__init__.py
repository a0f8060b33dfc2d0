"""Environments: data to prompt with and reward functions to score replies.

``get_environment("reverse-text", min_len=5, max_len=10)`` builds an environment by id (the
registry on disk, the built-ins ``reverse-text`` and ``arithmetic``, ``module:function`` import
paths, installed verifiers tasksets); ``builtin_ids()`` lists the built-ins. Importing this
package imports neither torch nor verifiers. The interface for user environments is described
in ``docs/environments.md``.
"""

from __future__ import annotations

from primenb.envs.base import Environment, RewardFunc, Row, completion_text, prompt_text
from primenb.envs.errors import (
    EnvironmentArgumentError,
    EnvironmentLoadError,
    EnvironmentLookupError,
    RegistryError,
    RewardFunctionError,
    UnsupportedEnvironmentError,
)
from primenb.envs.registry import (
    builtin_ids,
    environment_args,
    get_environment,
    is_known,
    known_ids,
    register_environment,
    resolve,
    suggest,
)

__all__ = [
    "Environment",
    "EnvironmentArgumentError",
    "EnvironmentLoadError",
    "EnvironmentLookupError",
    "RegistryError",
    "RewardFunc",
    "RewardFunctionError",
    "Row",
    "UnsupportedEnvironmentError",
    "builtin_ids",
    "completion_text",
    "environment_args",
    "get_environment",
    "is_known",
    "known_ids",
    "prompt_text",
    "register_environment",
    "resolve",
    "suggest",
]
