"""Upstream's validators of where a run's processes go: GPU and node layouts, inference
deployments, routers, KV-cache offload, transports, run directories and online evals (prime-rl's
`InferenceConfig`, and the deployment validators of `RLConfig` and `SFTConfig`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlparse

from primenb.config.positions import Path
from primenb.config.problem import Problem


def inference_rules(inference: Any, at: Path = ("inference",)) -> Iterator[Problem]:
    """`InferenceConfig`'s own validators (an RL or SFT config's `[inference]`)."""
    if inference is None:
        return
    kind = inference.deployment.type
    router = inference.router
    if kind in ("multi_node", "disaggregated") and inference.slurm is None:
        yield Problem(
            at + ("deployment", "type"),
            f"a {kind} inference deployment runs under SLURM: it needs a [slurm] table",
            'add [slurm] (it fills inference.slurm), or use type = "single_node"',
        )
    if router is not None and router.type == "llm-d" and inference.vllm.enable_return_routed_experts:
        yield Problem(
            at + ("router", "type"),
            "the llm-d router does not support routed-expert return (enable_return_routed_experts)",
            'use router type = "vllm-router"',
        )
    if router is not None and router.type == "llm-d" and kind == "single_node":
        yield Problem(
            at + ("router", "type"),
            "the llm-d router needs a multi_node or disaggregated SLURM deployment",
            'use router type = "vllm-router"',
        )
    if router is None and kind in ("multi_node", "disaggregated"):
        yield Problem(
            at + ("router",),
            f"a {kind} inference deployment needs a router in front of its engines",
            'drop `router = "None"`',
        )
    if inference.kv_cache_offload is not None and inference.vllm.enable_prefix_caching is False:
        yield Problem(
            at + ("vllm", "enable_prefix_caching"),
            "KV-cache offload needs prefix caching (enable_prefix_caching = true)",
            "drop enable_prefix_caching = false",
        )


def rl_deploy_rules(c: Any) -> Iterator[Problem]:
    inference, trainer = c.inference, c.trainer
    yield from inference_rules(inference)
    yield from _transport(c)
    yield from _run_dir(c)
    if inference is not None and c.deployment.type == "multi_node" and inference.router is None:
        yield Problem(
            ("inference", "router"), "a multi_node deployment needs inference.router", 'drop `router = "None"`'
        )
    offload = inference.kv_cache_offload if inference is not None else None
    if offload is not None and trainer.enable_router_replay:
        yield Problem(
            ("trainer", "enable_router_replay"),
            "router replay does not go with inference.kv_cache_offload (external KV hits carry no routed experts)",
        )
    if offload is not None and offload.type == "mooncake" and c.slurm is None:
        yield Problem(
            ("inference", "kv_cache_offload", "type"),
            "Mooncake KV offload runs under SLURM (the sbatch template starts its store): it needs [slurm]",
            'use type = "native" for a local run',
        )
    router = inference.router if inference is not None else None
    if trainer.enable_router_replay and router is not None and router.type == "llm-d":
        yield Problem(  # router replay turns routed-expert return on
            ("inference", "router", "type"),
            "the llm-d router does not support router replay (trainer.enable_router_replay)",
            'use router type = "vllm-router"',
        )
    if inference is not None and inference.vllm.enable_eplb:
        wb = c.weight_broadcast
        if wb is None or wb.type != "nccl" or not wb.quantize_in_weight_transfer:
            yield Problem(
                ("inference", "vllm", "enable_eplb"),
                'enable_eplb needs [weight_broadcast] type = "nccl" with quantize_in_weight_transfer = true',
            )


def infer_nodes(c: Any) -> tuple[int, Problem | None]:
    """A multi_node deployment's inference nodes per replica, as upstream derives them when
    `num_infer_nodes` is unset; and the problem when the written count disagrees."""
    dep, inference = c.deployment, c.inference
    d = inference.deployment if inference is not None else None
    if d is None:
        derived = 0
    elif d.type == "multi_node":
        derived = d.num_nodes
    elif d.type == "disaggregated":
        derived = (
            d.prefill_nodes_per_replica * d.num_prefill_replicas + d.decode_nodes_per_replica * d.num_decode_replicas
        )
    else:
        derived = 1
    if dep.num_infer_nodes is None:
        return derived, None
    if d is not None and d.type in ("multi_node", "disaggregated") and dep.num_infer_nodes != derived:
        return dep.num_infer_nodes, Problem(
            ("deployment", "num_infer_nodes"),
            f"num_infer_nodes ({dep.num_infer_nodes}) must equal the {d.type} inference deployment's nodes ({derived})",
            "drop num_infer_nodes (it follows the inference deployment), or make them equal",
        )
    return dep.num_infer_nodes, None


def _transport(c: Any) -> Iterator[Problem]:
    trainer = c.trainer.rollout_transport.type if c.trainer.rollout_transport else "zmq"
    orchestrator = c.orchestrator.rollout_transport.type if c.orchestrator.rollout_transport else "zmq"
    if trainer != orchestrator:
        written = ("trainer" if c.trainer.rollout_transport else "orchestrator", "rollout_transport", "type")
        yield Problem(
            written,
            f"trainer and orchestrator rollout transports differ ({trainer} vs {orchestrator})",
            "set the shared [rollout_transport] table instead, or the same type in both",
        )


def _run_dir(c: Any) -> Iterator[Problem]:
    """Under the rl entrypoint the sub-configs' output_dir is derived: output_dir / run.name."""
    name = c.run.dir or c.run.name
    run_dir = PurePosixPath(c.output_dir) / name if name else None
    for sub in ("trainer", "orchestrator"):
        written = getattr(c, sub).output_dir
        if written is not None and (run_dir is None or PurePosixPath(written) != run_dir):
            yield Problem(
                (sub, "output_dir"),
                f"{sub}.output_dir ({written}) is not the run directory "
                + (f"({run_dir})" if run_dir else "(output_dir / an auto-generated run.name)"),
                "drop it: set output_dir and run.name at the top level",
            )


def sft_eval_rules(c: Any) -> Iterator[Problem]:
    """`SFTConfig.auto_setup_online_eval`: the weight transport and servers of online evals."""
    if c.eval is None:
        return
    lora, inference, dep = c.model.lora is not None, c.inference, c.deployment
    wb = c.weight_broadcast
    kind = wb.type if wb is not None else ("filesystem" if lora or inference is None else "nccl")
    at: Path = ("weight_broadcast", "type") if wb is not None else ("eval",)
    if kind == "nixl":
        yield Problem(at, "NIXL weight broadcast is not supported for SFT online evals", 'use type = "filesystem"')
    elif kind != "filesystem" and lora:
        yield Problem(at, "LoRA training is not yet supported with in-memory weight broadcast", 'use "filesystem"')
    elif kind != "filesystem" and c.eval.retrigger_on_resume:
        yield Problem(
            ("eval", "retrigger_on_resume"),
            f'retrigger_on_resume needs weight_broadcast type = "filesystem" (it is {kind})',
        )
    if dep.type == "multi_node":
        if inference is None:
            yield Problem(("eval",), "online evals on a multi_node deployment need an [inference] table")
            return
        if dep.num_infer_nodes < 1:
            yield Problem(("deployment", "num_infer_nodes"), "online evals on multi_node need num_infer_nodes >= 1")
        if inference.router is None:
            yield Problem(("inference", "router"), "multi_node online evals need an inference router")
        if inference.vllm.model != c.model.name:
            yield Problem(("inference", "vllm", "model"), "inference.vllm.model differs from model.name")
        tp = inference.vllm.tensor_parallel_size
        if dep.gpus_per_node % tp:
            yield Problem(
                ("inference", "vllm", "tensor_parallel_size"),
                f"gpus_per_node ({dep.gpus_per_node}) must be divisible by tensor_parallel_size ({tp})",
            )
        return
    if inference is None:
        return
    client = c.eval.client
    port = inference.server.port
    if "base_url" in client.model_fields_set:
        url = client.base_url if isinstance(client.base_url, str) else (client.base_url or [""])[0]
        try:
            written = urlparse(url).port
        except ValueError:  # not a port at all: upstream's urlparse raises the same
            written = None
        if written != port:
            yield Problem(
                ("eval", "client", "base_url"),
                f"eval.client.base_url's port ({written}) is not inference.server.port ({port})",
                "drop base_url (it follows the inference server), or use the server's port",
            )


def sft_deployment(c: Any) -> Iterator[Problem]:
    dep = c.deployment
    if dep.type == "single_node":
        infer = dep.num_infer_gpus if c.inference is not None else 0  # SFT serves only online evals
        yield from _single_node_rules(dep, infer, c.inference)
    else:
        yield from _slurm_rule(c.slurm)
        yield from _fsdp_groups(dep)


def _fsdp_groups(dep: Any) -> Iterator[Problem]:
    if dep.nodes_per_fsdp_group and dep.num_train_nodes % dep.nodes_per_fsdp_group:
        yield Problem(
            ("deployment", "nodes_per_fsdp_group"),
            f"num_train_nodes ({dep.num_train_nodes}) must be divisible by nodes_per_fsdp_group "
            f"({dep.nodes_per_fsdp_group})",
        )


def _single_node_rules(dep: Any, infer: int, inference: Any) -> Iterator[Problem]:
    """GPU counts of a single-node deployment (RL and SFT alike)."""
    if dep.num_train_gpus + infer > dep.gpus_per_node:
        yield Problem(
            ("deployment", "num_infer_gpus" if infer else "num_train_gpus"),
            f"num_train_gpus ({dep.num_train_gpus}) + num_infer_gpus ({infer}) exceeds gpus_per_node "
            f"({dep.gpus_per_node})",
            "lower the GPU counts, raise gpus_per_node, or use a multi_node deployment",
        )
    tp = inference.vllm.tensor_parallel_size if inference is not None else 1
    if infer % tp:
        yield Problem(
            ("inference", "vllm", "tensor_parallel_size"),
            f"Number of inference GPUs ({infer}) must be divisible by the tensor parallel size ({tp})",
            f"use a tensor_parallel_size that divides {infer}, or change num_infer_gpus",
        )


def _slurm_rule(slurm: Any) -> Iterator[Problem]:
    if slurm is None:
        yield Problem(
            ("deployment", "type"),
            "a multi_node deployment needs a [slurm] table",
            'add [slurm] with at least job_name, or use type = "single_node"',
        )


def rl_deployment(c: Any) -> Iterator[Problem]:
    dep = c.deployment
    if dep.type == "single_node":
        yield from _single_node_rules(dep, dep.num_infer_gpus, c.inference)
        wb = c.weight_broadcast or c.trainer.weight_broadcast
        if wb is not None and wb.type == "nccl" and dep.num_train_gpus + dep.num_infer_gpus < 2:
            yield Problem(
                ("weight_broadcast", "type"),
                "NCCL weight broadcast on one node needs at least 2 GPUs",
                'use type = "filesystem"',
            )
    else:
        nodes, disagrees = infer_nodes(c)
        if disagrees:
            yield disagrees
        yield from _slurm_rule(c.slurm)
        if nodes > 0 and c.inference is None:
            yield Problem(
                ("deployment", "num_infer_nodes"),
                f"num_infer_nodes = {nodes} needs an [inference] table",
                "add [inference]",
            )
        if nodes == 0 and c.inference is not None:
            yield Problem(
                ("deployment", "num_infer_nodes"),
                "num_infer_nodes = 0 leaves the [inference] table without nodes",
                "set num_infer_nodes above 0, or drop [inference]",
            )
        if nodes == 0 and c.trainer.data.fake is None:
            yield Problem(
                ("deployment", "num_infer_nodes"),
                "num_infer_nodes = 0 needs trainer.data.fake",
                "add [trainer.data.fake], or give inference at least one node",
            )
        yield from _fsdp_groups(dep)
        inference = c.inference
        expert_parallel = inference is not None and inference.vllm.enable_expert_parallel
        if expert_parallel and inference.deployment.type != "disaggregated":
            yield from _expert_parallel(dep, nodes, inference.vllm)


def _expert_parallel(dep: Any, nodes: int, vllm: Any) -> Iterator[Problem]:
    """Multi-node expert-parallel inference: the engine layout follows the nodes exactly."""
    tp = vllm.tensor_parallel_size
    at: Path = ("inference", "vllm")
    if dep.gpus_per_node % tp:
        yield Problem(
            at + ("tensor_parallel_size",),
            f"gpus_per_node ({dep.gpus_per_node}) must be divisible by the tensor parallel size ({tp}) "
            "for multi-node expert-parallel inference",
        )
        return
    total = nodes * dep.gpus_per_node
    if vllm.data_parallel_size * tp != total:
        yield Problem(
            at + ("data_parallel_size",),
            f"data_parallel_size * tensor_parallel_size ({vllm.data_parallel_size} * {tp}) must match the "
            f"inference GPUs ({total}) for multi-node expert-parallel inference",
        )
    local = dep.gpus_per_node // tp
    if vllm.data_parallel_size_local is not None and vllm.data_parallel_size_local != local:
        yield Problem(
            at + ("data_parallel_size_local",),
            f"data_parallel_size_local must be gpus_per_node / tensor_parallel_size ({local})",
            "drop it: it is derived",
        )


def sft_infra(c: Any) -> Iterator[Problem]:
    yield from inference_rules(c.inference)
    yield from sft_eval_rules(c)


__all__ = [
    "infer_nodes",
    "inference_rules",
    "rl_deploy_rules",
    "rl_deployment",
    "sft_deployment",
    "sft_eval_rules",
    "sft_infra",
]
