"""Facts about a prime-rl config dict that every layer needs, written once: which mode it is,
where RL and SFT keep the same setting (`SETTINGS`), and the one path getter (`get_path`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Mode = Literal["rl", "sft"]
DEFAULT_MODEL = "primenb/tiny-byte"  # the embedded default: built in code, no download
DEFAULT_ANSWER_TOKENS = 64  # an answer's token budget when the config sets none ("answer_tokens")
# where a config that names no backend runs (`[primenb] backend`'s default), and where a run whose
# status or trace records none ran: the kernel's own host (`primenb.backends.local`)
DEFAULT_BACKEND = "local"

RL_SOURCE = "orchestrator.train.source[0]"
RL_TASKSET = f"{RL_SOURCE}.env.taskset"  # an RL environment's id and arguments (SFT has none)


@dataclass(frozen=True)
class Setting:
    """Where a setting lives: candidate paths in an RL and in an SFT config, the first present
    (not none) wins; an empty tuple: the mode has no such setting."""

    rl: tuple[str, ...]
    sft: tuple[str, ...]

    def paths(self, mode: Mode) -> tuple[str, ...]:
        return self.rl if mode == "rl" else self.sft

    def path(self, mode: Mode) -> str | None:
        """The canonical path (the first candidate), where a new value is written."""
        paths = self.paths(mode)
        return paths[0] if paths else None


# The one table of where RL and SFT keep a setting (the run index, the config builder and the
# "did you mean" hints all read it).
SETTINGS: dict[str, Setting] = {
    "model": Setting(("model.name", "trainer.model.name"), ("model.name",)),
    "env": Setting((f"{RL_TASKSET}.id",), ("data.name",)),
    "dataset": Setting((), ("data.name",)),  # RL reads tasks from an environment, not a dataset
    "max_steps": Setting(("max_steps",), ("max_steps",)),
    "lr": Setting(("trainer.optim.lr",), ("optim.lr",)),
    "weight_decay": Setting(("trainer.optim.weight_decay",), ("optim.weight_decay",)),
    "max_norm": Setting(("trainer.optim.max_norm",), ("optim.max_norm",)),
    "warmup_steps": Setting(("trainer.scheduler.warmup_steps",), ("scheduler.warmup_steps",)),
    "scheduler_type": Setting(("trainer.scheduler.type",), ("scheduler.type",)),
    "batch_size": Setting(("orchestrator.batch_size",), ("data.batch_size",)),
    "micro_batch_size": Setting((), ("data.micro_batch_size",)),
    "group_size": Setting(("orchestrator.group_size",), ()),
    "seq_len": Setting(("seq_len", "trainer.model.seq_len"), ("data.seq_len",)),
    "max_tokens": Setting(("orchestrator.train.sampling.max_completion_tokens",), ()),
    # the token budget of one answer: RL's training completions (else its eval's), SFT's eval answers
    "answer_tokens": Setting(
        ("orchestrator.train.sampling.max_completion_tokens", "orchestrator.eval.sampling.max_completion_tokens"),
        ("eval.sampling.max_completion_tokens",),
    ),
    "temperature": Setting(("orchestrator.train.sampling.temperature",), ()),
    "lora": Setting(("trainer.model.lora",), ("model.lora",)),
    "lora_rank": Setting(("trainer.model.lora.rank",), ("model.lora.rank",)),
    "lora_alpha": Setting(("trainer.model.lora.alpha",), ("model.lora.alpha",)),
    "lora_dropout": Setting(("trainer.model.lora.dropout",), ("model.lora.dropout",)),
    "lora_targets": Setting(("trainer.model.lora.target_modules",), ("model.lora.target_modules",)),
    "ckpt_interval": Setting(("ckpt.interval",), ("ckpt.interval",)),
    "eval_interval": Setting(("orchestrator.eval.interval",), ("eval.interval",)),
    "train_gpus": Setting(("deployment.num_train_gpus",), ("deployment.num_train_gpus",)),
    "infer_gpus": Setting(("deployment.num_infer_gpus",), ()),
    "backend": Setting(("primenb.backend",), ("primenb.backend",)),
    "seed": Setting(("primenb.seed",), ("primenb.seed",)),
    "wandb_project": Setting(("monitors.wandb.project",), ("monitors.wandb.project",)),
}


def detect_mode(data: dict[str, Any]) -> Mode:
    """As the prime CLI: [data] and no [trainer]/[orchestrator] means SFT, anything else RL."""
    return "sft" if "data" in data and "trainer" not in data and "orchestrator" not in data else "rl"


PathLike = str | Sequence[str | int]
MISSING: Any = object()  # `lookup`'s answer where a path does not exist
_PART = re.compile(r"^([^.\[\]]+)((?:\[\d+\])*)$")


def path_parts(path: PathLike) -> list[str | int]:
    """``"a.b[0].c"`` -> ``["a", "b", 0, "c"]``; a sequence of parts is taken as it is."""
    if not isinstance(path, str):
        return list(path)
    parts: list[str | int] = []
    for piece in path.split("."):
        m = _PART.match(piece)
        if not m:
            parts.append(piece)
            continue
        parts.append(m.group(1))
        parts += [int(i) for i in re.findall(r"\[(\d+)\]", m.group(2))]
    return parts


def lookup(data: Any, path: PathLike, default: Any = MISSING) -> Any:
    """The value at ``path`` (``"a.b[0].c"`` or ``("a", "b", 0, "c")``) in nested tables and
    lists, or ``default`` where a part is missing or is not a table/list."""
    for part in path_parts(path):
        if isinstance(part, int):
            if not (isinstance(data, list) and 0 <= part < len(data)):
                return default
            data = data[part]
        elif isinstance(data, dict) and part in data:
            data = data[part]
        else:
            return default
    return data


def get_path(data: Any, path: PathLike) -> Any:
    """`lookup` with None for a missing path."""
    return lookup(data, path, None)


def field_path(field: str, mode: Mode) -> str | None:
    return SETTINGS[field].path(mode)


def get_field(data: dict[str, Any], field: str, mode: Mode | None = None) -> Any:
    """A setting wherever the config's mode keeps it: the first candidate path that is set."""
    for path in SETTINGS[field].paths(mode or detect_mode(data)):
        value = get_path(data, path)
        if value is not None:
            return value
    return None


__all__ = [
    "DEFAULT_ANSWER_TOKENS",
    "DEFAULT_BACKEND",
    "DEFAULT_MODEL",
    "MISSING",
    "RL_SOURCE",
    "RL_TASKSET",
    "SETTINGS",
    "Mode",
    "PathLike",
    "Setting",
    "detect_mode",
    "field_path",
    "get_field",
    "get_path",
    "lookup",
    "path_parts",
]
