"""`sft.toml`: the top level of a prime-rl SFT config (`SFTConfig`), disjoint from RL."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import AliasChoices, Field, model_validator

from primenb.config.schema.common import (
    AdamWConfig,
    ConstantScheduler,
    EnvVars,
    GCConfig,
    HeartbeatConfig,
    MonitorsConfig,
    NonNegInt,
    Optimizer,
    PosInt,
    PrimenbSettings,
    ResumeConfig,
    RunConfig,
    SaneNonNegInt,
    SanePosInt,
    Scheduler,
    Section,
    SharedWeightBroadcast,
    SlurmConfig,
    TokenizerConfig,
    typed_union,
)
from primenb.config.schema.inference import InferenceConfig
from primenb.config.schema.orchestrator import (
    ClientConfig,
    ConcurrencyConfig,
    EvalConfig,
    RendererConfig,
)
from primenb.config.schema.trainer import (
    MatmulPrecision,
    ModelConfig,
    TrainerCkptConfig,
    TrainerLogConfig,
)


class LossMaskConfig(Section):
    system: bool = False
    user: bool = False
    assistant: bool = True
    tool: bool = False


class SFTDataConfig(Section):
    type: Literal["sft"] = "sft"
    name: str = "PrimeIntellect/Reverse-Text-SFT"
    subsets: list[str] | None = None
    splits: list[str] | None = None
    probabilities: list[float] | None = None
    stopping_strategy: Literal["all_exhausted", "first_exhausted"] = "all_exhausted"
    shuffle: bool = True
    seed: int = 0
    loss_mask: LossMaskConfig = LossMaskConfig()
    batch_size: PosInt = 128
    seq_len: PosInt = 128
    micro_batch_size: PosInt = 1
    num_workers: PosInt = 1


class FakeSFTDataConfig(Section):
    type: Literal["fake"] = "fake"
    batch_size: PosInt = 2
    seq_len: PosInt = 128
    micro_batch_size: PosInt = 1
    num_workers: PosInt = 1
    length: Literal["fixed", "variable"] = "fixed"
    input_ids: Literal["increasing", "random"] = "increasing"
    seed: int = 0


SFTData: TypeAlias = Annotated[SFTDataConfig | FakeSFTDataConfig, typed_union("sft")]


class ValConfig(Section):
    interval: PosInt = 50
    eval_on_start: bool = False
    data: SFTData | None = None


class SFTEvalConfig(EvalConfig):
    client: ClientConfig = ClientConfig()
    env_server_base_port: Annotated[int, Field(ge=1, le=65535)] = 5000
    concurrency: ConcurrencyConfig = ConcurrencyConfig()


class SFTSingleNode(Section):
    type: Literal["single_node"] = "single_node"
    gpus_per_node: SanePosInt = 8
    num_train_gpus: SanePosInt = 1
    num_infer_gpus: SaneNonNegInt = Field(default=1, validation_alias=AliasChoices("num_infer_gpus", "num_eval_gpus"))


class SFTMultiNode(Section):
    type: Literal["multi_node"] = "multi_node"

    @model_validator(mode="before")
    @classmethod
    def _drop_gpu_counts(cls, data: Any) -> Any:
        """Upstream drops a single node's GPU counts from a multi_node table (normalize_deployment)."""
        if isinstance(data, dict) and ("num_train_gpus" in data or "num_infer_gpus" in data):
            return {k: v for k, v in data.items() if k not in ("num_train_gpus", "num_infer_gpus")}
        return data

    gpus_per_node: SanePosInt = 8
    num_train_nodes: PosInt = 2
    num_infer_nodes: NonNegInt = 0
    nodes_per_fsdp_group: SanePosInt | None = None


SFTDeployment: TypeAlias = Annotated[SFTSingleNode | SFTMultiNode, typed_union("single_node")]


class SFTConfig(Section):
    model: ModelConfig = ModelConfig()
    env_vars: EnvVars = {}
    tokenizer: TokenizerConfig | None = None
    renderer: RendererConfig = RendererConfig(name="auto")
    data: SFTData = SFTDataConfig()
    val: ValConfig | None = None
    eval: SFTEvalConfig | None = None
    inference: InferenceConfig | None = None
    weight_broadcast: SharedWeightBroadcast | None = None
    optim: Optimizer = AdamWConfig()
    scheduler: Scheduler = ConstantScheduler()
    ckpt: TrainerCkptConfig | None = None
    resume: ResumeConfig | None = None
    log: TrainerLogConfig = TrainerLogConfig()
    monitors: MonitorsConfig = MonitorsConfig()
    run: RunConfig = RunConfig()
    output_dir: str = "outputs"
    clean: bool = False
    matmul_precision: MatmulPrecision = "high"
    max_steps: SanePosInt | None = None
    gc: GCConfig | None = GCConfig()
    trace_path: str | None = None
    dist_timeout_seconds: SanePosInt = 3600
    heartbeat: HeartbeatConfig | None = None
    deployment: SFTDeployment = SFTSingleNode()
    slurm: SlurmConfig | None = None
    dry_run: bool = False
    primenb: PrimenbSettings | None = None
