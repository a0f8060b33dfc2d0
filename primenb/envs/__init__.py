"""Environments: data to prompt with and reward functions to score replies.

``get_environment("reverse-text", min_len=5, max_len=10)`` builds the built-in environment;
``builtin_ids()`` lists the built-ins. No torch import happens here.
"""

from __future__ import annotations

from primenb.envs.base import Environment, RewardFunc, Row, completion_text, prompt_text
from primenb.envs.errors import EnvironmentArgumentError, EnvironmentLookupError
from primenb.envs.registry import (
    builtin_ids,
    environment_args,
    get_environment,
    is_known,
    known_ids,
    register_environment,
    suggest,
)

__all__ = [
    "Environment",
    "EnvironmentArgumentError",
    "EnvironmentLookupError",
    "RewardFunc",
    "Row",
    "builtin_ids",
    "completion_text",
    "environment_args",
    "get_environment",
    "is_known",
    "known_ids",
    "prompt_text",
    "register_environment",
    "suggest",
]
