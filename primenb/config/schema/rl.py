"""`rl.toml`: the top level of a prime-rl RL config (`RLConfig`)."""

from __future__ import annotations

from typing import Annotated, Literal, TypeAlias

from primenb.config.schema.common import (
    CkptConfig,
    EnvVars,
    LogConfig,
    NonNegInt,
    PosInt,
    PrimenbSettings,
    ResumeConfig,
    RolloutTransport,
    RunConfig,
    SaneNonNegInt,
    SanePosInt,
    Section,
    SharedModelConfig,
    SharedMonitorsConfig,
    SharedWeightBroadcast,
    SlurmConfig,
    TokenizerConfig,
    typed_union,
)
from primenb.config.schema.inference import InferenceConfig
from primenb.config.schema.orchestrator import OrchestratorConfig
from primenb.config.schema.trainer import TrainerConfig


class SingleNodeDeployment(Section):
    type: Literal["single_node"] = "single_node"
    gpus_per_node: SanePosInt = 8
    num_train_gpus: SanePosInt = 1
    num_infer_gpus: SaneNonNegInt = 1


class MultiNodeDeployment(Section):
    type: Literal["multi_node"] = "multi_node"
    gpus_per_node: SanePosInt = 8
    num_train_nodes: SanePosInt
    num_infer_nodes: NonNegInt | None = None  # None: derived from [inference] (upstream's auto_setup_infer_nodes)
    num_infer_replicas: PosInt = 1
    nodes_per_fsdp_group: SanePosInt | None = None
    orchestrator_on_inference: bool = False


Deployment: TypeAlias = Annotated[SingleNodeDeployment | MultiNodeDeployment, typed_union("single_node")]


class RLConfig(Section):
    # required as upstream: an RL config without [trainer] or [orchestrator] is refused there
    trainer: TrainerConfig
    orchestrator: OrchestratorConfig
    inference: InferenceConfig | None = None
    env_vars: EnvVars = {}
    run: RunConfig = RunConfig()
    output_dir: str = "outputs"
    clean: bool = False
    log: LogConfig | None = None
    ckpt: CkptConfig | None = None
    resume: ResumeConfig | None = None
    monitors: SharedMonitorsConfig = SharedMonitorsConfig()
    model: SharedModelConfig | None = None
    tokenizer: TokenizerConfig | None = None
    max_steps: SanePosInt | None = None
    seq_len: SanePosInt | None = None
    weight_broadcast: SharedWeightBroadcast | None = None
    rollout_transport: RolloutTransport | None = None
    deployment: Deployment = SingleNodeDeployment()
    slurm: SlurmConfig | None = None
    dry_run: bool = False
    primenb: PrimenbSettings | None = None
