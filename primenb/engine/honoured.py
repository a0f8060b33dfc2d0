"""Which settings the local engine honours, and the run's "not used locally" list. Pure Python.

Every leaf of the RL and SFT schemas is in one of three places: `PLAN` (`build_plan` reads it),
`ELSEWHERE` (primenb reads it outside the plan: the backend, the monitor, the trace), or neither,
and then a config that sets it (to anything but the schema's default) gets it listed as not used
locally. ``tests/engine/test_honoured.py`` walks both schemas and holds every leaf to this.
Patterns are dotted paths with ``[]`` for a list item and ``*`` for any one key.
"""

from __future__ import annotations

from typing import Any

from primenb.config.diagnostics import format_path as dotted
from primenb.config.leaves import pattern, set_leaves
from primenb.config.propagate import fed_by
from primenb.config.schema import RLConfig, SFTConfig

_OPTIM = ("type", "lr", "weight_decay", "max_norm", "betas1", "betas2", "momentum", "nesterov", "mu")
_SCHEDULER = ("type", "warmup_steps", "decay_steps", "min_lr")
_LORA = ("rank", "alpha", "dropout", "target_modules", "modules_to_save")
_SOURCE = ("name", "env.id", "env.taskset.id", "env.taskset.*")
_EVAL = ("interval", "num_examples", "sampling.max_completion_tokens") + tuple(f"source[].{k}" for k in _SOURCE)
_PRIMENB = (
    "seed",
    "sample_every",
    "logging_steps",
    "init_from",
    "start_step",
    "privacy.data_collection",
    "report_to",
)
# [monitors.wandb]: a W&B run per primenb run (primenb.trackers)
_WANDB = ("monitors.wandb", "monitors.wandb.*")

PLAN: dict[str, tuple[str, ...]] = {
    "rl": (
        "max_steps",
        "trainer.max_steps",
        "orchestrator.max_steps",
        "model.name",
        "trainer.model.name",
        "seq_len",
        "orchestrator.seq_len",
        "trainer.model.seq_len",
        *(f"trainer.optim.{k}" for k in _OPTIM),
        *(f"trainer.scheduler.{k}" for k in _SCHEDULER),
        "trainer.model.lora",
        *(f"trainer.model.lora.{k}" for k in _LORA),
        "ckpt.interval",
        "ckpt.keep_last",
        "trainer.ckpt.interval",
        "trainer.ckpt.keep_last",
        "run.name",
        "orchestrator.batch_size",
        "orchestrator.token_batch_size",
        "orchestrator.group_size",
        "orchestrator.train.sampling.temperature",
        "orchestrator.train.sampling.max_completion_tokens",
        *(f"orchestrator.train.source[].{k}" for k in _SOURCE),
        *(f"orchestrator.eval.{k}" for k in _EVAL),
        *(f"primenb.{k}" for k in _PRIMENB),
        "primenb.sft_warmup_steps",
        "primenb.reward_error_limit",
        *_WANDB,
        *(f"{part}.{k}" for part in ("trainer", "orchestrator") for k in _WANDB),
    ),
    "sft": (
        "max_steps",
        "model.name",
        "model.seq_len",
        *(f"optim.{k}" for k in _OPTIM),
        *(f"scheduler.{k}" for k in _SCHEDULER),
        "model.lora",
        *(f"model.lora.{k}" for k in _LORA),
        "ckpt.interval",
        "ckpt.keep_last",
        "run.name",
        "data.type",
        "data.name",
        "data.subsets",
        "data.splits",
        "data.shuffle",
        "data.seed",
        "data.batch_size",
        "data.micro_batch_size",
        "data.seq_len",
        "data.loss_mask.system",
        "data.loss_mask.user",
        *(f"eval.{k}" for k in _EVAL),
        *(f"primenb.{k}" for k in _PRIMENB),
        *_WANDB,
    ),
}

# read by primenb outside the engine's plan: pattern -> who reads it
ELSEWHERE: dict[str, str] = {
    "output_dir": "the backend: the folder the run directory goes in",
    "run.dir": "the backend: the run directory",
    "deployment.num_train_gpus": "the local backend: the number of training processes",
    "primenb.backend": "the launcher: which backend runs the config",
    "primenb.monitor.*": "the notebook monitor",
    "primenb.privacy.record_hostname": "the run trace and status",
    "primenb.privacy.record_git": "the run trace",
}


def _matches(spec: str, path: str) -> bool:
    want, got = spec.split("."), path.split(".")
    return len(want) == len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=True))


def _under(spec: str, table: str) -> bool:
    """Whether ``spec`` names something inside ``table`` (both patterns)."""
    want, got = spec.split("."), table.split(".")
    return len(want) > len(got) and all(w in ("*", g) for w, g in zip(want, got, strict=False))


def is_honoured(mode: str, path: str) -> bool:
    """Whether the leaf (a pattern path) is read by the plan or elsewhere in primenb."""
    return any(_matches(spec, path) for spec in (*PLAN[mode], *ELSEWHERE))


def _honours_inside(mode: str, table: str) -> bool:
    return any(_under(spec, table) for spec in (*PLAN[mode], *ELSEWHERE))


def not_used_locally(model: RLConfig | SFTConfig) -> list[str]:
    """The settings of ``model`` that differ from the schema's defaults and that the local engine
    does not honour, as dotted paths (``orchestrator.train.source[0].ratio``). A present table
    nothing of which is honoured is listed once, not key by key; a sub-config value that a shared
    setting filled (``[ckpt]`` into ``[orchestrator.ckpt]``) is left to the shared setting."""
    mode = "sft" if isinstance(model, SFTConfig) else "rl"
    leaves = list(set_leaves(model))
    fed_values: dict[tuple[str | int, ...], Any] = {}  # sub-config key -> the shared value that filled it
    fed_tables: set[tuple[str | int, ...]] = set()
    for leaf in leaves:
        if all(isinstance(p, str) for p in leaf.path):
            for target in fed_by(tuple(str(p) for p in leaf.path), mode):
                if leaf.table:
                    fed_tables.add(target)
                else:
                    fed_values[target] = leaf.value
    out: list[str] = []
    reported: list[tuple[str | int, ...]] = []
    for leaf in leaves:
        if any(leaf.path[: len(r)] == r for r in reported):
            continue
        where = pattern(leaf.path)
        if leaf.table:
            if not _honours_inside(mode, where) and leaf.path not in fed_tables:
                out.append(dotted(leaf.path))
                reported.append(leaf.path)
        elif leaf.path in fed_values and fed_values[leaf.path] == leaf.value:
            continue  # a shared setting filled it: judged where the user wrote it
        elif not is_honoured(mode, where):
            out.append(dotted(leaf.path))
    return out


__all__ = ["ELSEWHERE", "PLAN", "is_honoured", "not_used_locally"]
