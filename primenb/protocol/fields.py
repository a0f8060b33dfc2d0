"""Facts about a prime-rl config dict that every layer needs, written once: which mode it is,
and where RL and SFT keep the same setting."""

from __future__ import annotations

from typing import Any, Literal

Mode = Literal["rl", "sft"]
DEFAULT_MODEL = "primenb/tiny-byte"  # the embedded default: built in code, no download

# setting -> (path in an RL config, path in an SFT config); None: the mode has no such setting
FIELD_PATHS: dict[str, tuple[str | None, str | None]] = {
    "lr": ("trainer.optim.lr", "optim.lr"),
    "batch_size": ("orchestrator.batch_size", "data.batch_size"),
    "group_size": ("orchestrator.group_size", None),
    "seq_len": ("trainer.model.seq_len", "data.seq_len"),
    "model": ("model.name", "model.name"),
    "seed": ("primenb.seed", "primenb.seed"),
    "max_steps": ("max_steps", "max_steps"),
}


def detect_mode(data: dict[str, Any]) -> Mode:
    """As the prime CLI: [data] and no [trainer]/[orchestrator] means SFT, anything else RL."""
    return "sft" if "data" in data and "trainer" not in data and "orchestrator" not in data else "rl"


def get_path(data: Any, dotted: str) -> Any:
    """``data["a"]["b"]`` for ``"a.b"``; None where a part is missing or not a table."""
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def field_path(field: str, mode: Mode) -> str | None:
    rl, sft = FIELD_PATHS[field]
    return rl if mode == "rl" else sft


def get_field(data: dict[str, Any], field: str, mode: Mode | None = None) -> Any:
    """A setting wherever the config's mode keeps it (``model`` falls back to trainer.model.name)."""
    path = field_path(field, mode or detect_mode(data))
    value = get_path(data, path) if path else None
    if value is None and field == "model":
        value = get_path(data, "trainer.model.name")
    return value


__all__ = ["DEFAULT_MODEL", "FIELD_PATHS", "Mode", "detect_mode", "field_path", "get_field", "get_path"]
