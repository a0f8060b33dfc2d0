"""The SLURM batch script for a run, from ``[slurm]`` and ``[deployment]`` (a pure function).

One task per node (``srun --ntasks-per-node=1``); each task runs ``accelerate launch`` with the
main process address taken from the first node of the allocation, a port derived from the job id,
and its machine rank from ``$SLURM_NODEID``. A run with one process runs the engine directly.
"""

from __future__ import annotations

import re
import shlex
import unicodedata
from dataclasses import dataclass
from typing import Any

from primenb.engine.launch import ENGINE_MODULE
from primenb.errors import PrimenbError


@dataclass(frozen=True)
class Layout:
    nodes: int
    procs_per_node: int

    @property
    def world(self) -> int:
        return self.nodes * self.procs_per_node


def layout(config: Any) -> Layout:
    """Training nodes and processes per node: ``multi_node`` uses ``num_train_nodes`` x
    ``gpus_per_node``; ``single_node`` one node x ``num_train_gpus``."""
    dep = config.model.deployment
    if getattr(dep, "type", "single_node") == "multi_node":
        return Layout(int(dep.num_train_nodes), int(dep.gpus_per_node))
    return Layout(1, int(getattr(dep, "num_train_gpus", 1) or 1))


def node_command(python: str, run_dir: str, lay: Layout) -> str:
    """The shell command each node's task runs (``$SLURM_NODEID`` etc. expand on the node)."""
    q = shlex.quote
    if lay.world == 1:
        return f"exec {q(python)} -m {ENGINE_MODULE} {q(run_dir)}"
    return " ".join(
        [
            f"exec {q(python)} -m accelerate.commands.launch",
            "--multi_gpu",
            f"--num_machines {lay.nodes}",
            f"--num_processes {lay.world}",
            '--machine_rank "$SLURM_NODEID"',
            '--main_process_ip "$MASTER_ADDR"',
            '--main_process_port "$MASTER_PORT"',
            "--rdzv_backend static",
            "--same_network",
            "--mixed_precision no",
            "--dynamo_backend no",
            f"-m {ENGINE_MODULE} {q(run_dir)}",
        ]
    )


class SlurmScriptError(PrimenbError):
    pass


def one_line(key: str, value: Any) -> str:
    """A value that goes into one line of the script: a line break (or any control character)
    would end the ``#SBATCH`` line and start a shell line or another directive, so it is refused."""
    text = str(value)
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in text):
        raise SlurmScriptError(
            f"[slurm] {key} = {text!r} holds a line break or control character; write it on one line"
        )
    return text


def directive(key: str, value: Any) -> str:
    """``#SBATCH --key=value``, the value quoted for sbatch (which reads quotes in these lines)
    unless it is plain; refused when it holds a line break."""
    text = one_line(key, value)
    return f"#SBATCH --{key}={text if _PLAIN.match(text) else shlex.quote(text)}"


_PLAIN = re.compile(r"^[A-Za-z0-9_.,:@%+/=\[\]-]+\Z")


def batch_script(config: Any, run_dir: str, *, python: str = "python3", request_gpus: bool = True) -> str:
    """The whole ``sbatch`` script (saved in the run directory: it holds no environment values; a
    job inherits the submitting environment)."""
    from primenb.config.schema.common import SlurmConfig

    s = config.model.slurm or SlurmConfig()
    lay = layout(config)
    name = one_line("run name", config.model.run.name or run_dir.rstrip("/").rsplit("/", 1)[-1])
    q = shlex.quote
    head = [
        "#!/bin/bash",
        directive("job-name", s.job_name),
        directive("partition", s.partition),
        f"#SBATCH --nodes={lay.nodes}",
        "#SBATCH --ntasks-per-node=1",
    ]
    if request_gpus:
        head.append(f"#SBATCH --gpus-per-node={lay.procs_per_node}")
    for key in ("account", "time", "nodelist", "exclude"):
        value = getattr(s, key)
        if value:
            head.append(directive(key, value))
    head += [
        directive("output", f"{run_dir}/logs/launcher.log"),
        "#SBATCH --open-mode=append",
        f"# primenb run {name}: {lay.nodes} node(s) x {lay.procs_per_node} process(es); by hand: sbatch THIS_FILE",
        "set -euo pipefail",
    ]
    body = []
    if s.project_dir and s.project_dir != ".":
        body.append(f"cd {q(s.project_dir)}")
    body += ["export PYTHONUNBUFFERED=1"]
    if s.pre_run_command:
        body.append(s.pre_run_command)
    body += [
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))",
        f"srun --nodes={lay.nodes} --ntasks={lay.nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 "
        f"bash -c {q(node_command(python, run_dir, lay))}",
    ]
    return "\n".join(head + body) + "\n"


__all__ = ["Layout", "SlurmScriptError", "batch_script", "directive", "layout", "node_command", "one_line"]
