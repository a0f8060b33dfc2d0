"""The OpenAI-compatible API's names, spelled once: route paths and the ``object`` of each answer.
The serving app declares its routes with them, its client calls them, and the policy server inside
training (which may not import `primenb.serve`) can read them here."""

from __future__ import annotations

API_ROOT = "/v1"  # a server's URL ends here; the routes below it are OpenAI's and vLLM's

HEALTH = "/health"
VERSION = "/version"
MODELS = f"{API_ROOT}/models"
CHAT_COMPLETIONS = f"{API_ROOT}/chat/completions"
COMPLETIONS = f"{API_ROOT}/completions"
LOAD_LORA = f"{API_ROOT}/load_lora_adapter"  # vLLM's
UNLOAD_LORA = f"{API_ROOT}/unload_lora_adapter"
GENERATE = f"/inference{API_ROOT}/generate"  # vLLM's token route (verifiers' training client)

ADMIN_STATS = "/admin/stats"  # primenb's own: `%prime_serve` reads and changes a server with these
ADMIN_MODELS = "/admin/models"
ADMIN_SHUTDOWN = "/admin/shutdown"

# the ``object`` field of each answer
MODEL = "model"
LIST = "list"
CHAT_COMPLETION = "chat.completion"
CHAT_COMPLETION_CHUNK = "chat.completion.chunk"
TEXT_COMPLETION = "text_completion"  # OpenAI names a streamed completion's chunks the same


def completion_object(chat: bool, *, chunk: bool) -> str:
    """The ``object`` of a chat or text completion, whole or one streamed chunk."""
    if not chat:
        return TEXT_COMPLETION
    return CHAT_COMPLETION_CHUNK if chunk else CHAT_COMPLETION


__all__ = [
    "ADMIN_MODELS",
    "ADMIN_SHUTDOWN",
    "ADMIN_STATS",
    "API_ROOT",
    "CHAT_COMPLETION",
    "CHAT_COMPLETIONS",
    "CHAT_COMPLETION_CHUNK",
    "COMPLETIONS",
    "GENERATE",
    "HEALTH",
    "LIST",
    "LOAD_LORA",
    "MODEL",
    "MODELS",
    "TEXT_COMPLETION",
    "UNLOAD_LORA",
    "VERSION",
    "completion_object",
]
