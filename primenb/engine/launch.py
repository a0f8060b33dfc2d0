"""How to start the engine: pure functions, no torch import."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ENGINE_MODULE = "primenb.engine"


def launch_command(
    run_dir: str | os.PathLike[str],
    num_processes: int = 1,
    *,
    launcher: str = "torchrun",
    python: str | None = None,
) -> list[str]:
    """The argv that trains the run in ``run_dir`` with ``num_processes`` ranks.

    One process: ``python -m primenb.engine RUN_DIR``. Several: ``torchrun --standalone`` (as
    ``python -m torch.distributed.run``, so no console script needs to be on PATH), or with
    ``launcher="accelerate"``: ``accelerate launch --multi_gpu ...``, which also starts N gloo
    ranks on a machine with no GPU. (``accelerate launch --cpu --num_processes N`` is avoided: it
    silently starts one process.) Start it in its own process group and stop it by writing
    ``RUN_DIR/STOP`` or sending SIGTERM.
    """
    if num_processes < 1:
        raise ValueError(f"num_processes must be >= 1, got {num_processes}")
    py = python or sys.executable
    target = str(Path(run_dir))
    if num_processes == 1:
        return [py, "-m", ENGINE_MODULE, target]
    if launcher == "torchrun":
        return [
            py,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(num_processes),
            "-m",
            ENGINE_MODULE,
            target,
        ]
    if launcher == "accelerate":
        return [
            py,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            str(num_processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "-m",
            ENGINE_MODULE,
            target,
        ]
    raise ValueError(f"unknown launcher {launcher!r}; use 'torchrun' or 'accelerate'")


__all__ = ["ENGINE_MODULE", "launch_command"]
