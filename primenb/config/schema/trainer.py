"""`[trainer]` (RL) and the model section the SFT trainer shares with it."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BeforeValidator, Field

from primenb.config.schema.common import (
    AdamWConfig,
    CkptConfig,
    ConstantScheduler,
    EnvVars,
    GCConfig,
    HeartbeatConfig,
    LoraConfig,
    MonitorsConfig,
    Optimizer,
    PosInt,
    ResumeConfig,
    RolloutTransport,
    SanePosInt,
    Scheduler,
    Section,
    TokenizerConfig,
    VLMConfig,
    WeightBroadcast,
    typed_union,
)

NonNegFloat = Annotated[float, Field(ge=0)]


class CompileConfig(Section):
    fullgraph: bool = False


class ActivationCheckpointConfig(Section):
    mode: Literal["full", "selective"] = "full"
    freq: PosInt = 1
    targets: list[str] = ["norm"]


class ActivationOffloadConfig(Section):
    pin_memory: bool = True
    max_inflight_activations: PosInt = 5


class DebugModelConfig(Section):
    num_layers: SanePosInt | None = None
    random_init: bool = False
    force_balanced_routing: bool = False


Dtype = Literal["float32", "bfloat16"]


class FP8Config(Section):
    type: Literal["fp8"] = "fp8"
    enable_grouped_gemm: bool = True
    ignore_patterns: list[str] | None = None


class MXFP8Config(Section):
    type: Literal["mxfp8"] = "mxfp8"
    recipe: Literal["mxfp8_rceil", "mxfp8_rceil_wgrad_with_hp"] = "mxfp8_rceil"
    enable_grouped_gemm: bool = True
    enable_a2a: bool = True
    ignore_patterns: list[str] | None = None


# `[trainer.model.quantization] type = "fp8"`: optional, so upstream needs the tag.
Quantization: TypeAlias = Annotated[FP8Config | MXFP8Config, typed_union(None)]


class OptimizerInBackwardOffload(Section):
    cpu_optimizer_backend: Literal["native", "torch"] = "native"
    numa_bind: bool = True


class IndexCacheConfig(Section):
    topk_freq: PosInt = 1
    topk_pattern: str | None = None


def _offload_flag(value: Any) -> Any:
    """`full_offload = true` is upstream's short form of an empty table (false: off); only real
    booleans (TOML's true/false), not "yes"."""
    if value is True:
        return {}
    return None if value is False else value


FullOffload: TypeAlias = Annotated[OptimizerInBackwardOffload | None, BeforeValidator(_offload_flag)]


class ModelConfig(Section):
    name: str = "Qwen/Qwen3-0.6B"
    trust_remote_code: bool = False
    vlm: VLMConfig | None = None
    conversion_dir: str | None = None
    seq_len: SanePosInt = 2048
    attn: Literal["flash_attention_2", "flash_attention_3", "flash_attention_4", "auto"] = "auto"
    compile: CompileConfig | None = CompileConfig()
    ac: ActivationCheckpointConfig | None = ActivationCheckpointConfig()
    ac_offloading: ActivationOffloadConfig | None = ActivationOffloadConfig()
    fsdp_cpu_offload: bool = False
    optim_cpu_offload: bool = True
    full_offload: FullOffload = None
    reshard_after_forward: bool = True
    dp_replicate: SanePosInt = 1
    ep: SanePosInt | Literal["auto"] = "auto"
    ep_comm_backend: Literal["torch", "deepep"] = "torch"
    deepep_num_sms: PosInt = 20
    deepep_token_chunk_size: PosInt | None = None
    cp: SanePosInt = 1
    cp_style: Literal["ring", "ulysses"] = "ring"
    impl: Literal["hf", "custom", "auto"] = "auto"
    optimization_dtype: Dtype = "float32"
    reduce_dtype: Dtype = "float32"
    quantization: Quantization | None = None
    freeze_moe_router: bool = False
    moe_fused_kernel: bool = False
    moe_router_dtype: Literal["bfloat16", "float32"] = "float32"
    moe_use_grouped_mm: bool = True
    index_cache: IndexCacheConfig | None = None
    lora: LoraConfig | None = None
    debug: DebugModelConfig = DebugModelConfig()
    fused_lm_head_token_chunk_size: SanePosInt | Literal["disabled"] | None = 8192


class FakeDataConfig(Section):
    batch_size: PosInt = 2
    generate_samples: bool = False


class TrainerDataConfig(Section):
    fake: FakeDataConfig | None = None


class DefaultLoss(Section):
    type: Literal["default"] = "default"
    dppo_mask_low: NonNegFloat = 0.2
    dppo_mask_high: NonNegFloat = 0.2
    adv_tau: NonNegFloat = 1.0
    kl_tau: NonNegFloat = 1e-3


class IPOLoss(Section):
    type: Literal["ipo"] = "ipo"
    ipo_threshold: NonNegFloat = 0.1
    adv_tau: NonNegFloat = 1.0
    kl_tau: NonNegFloat = 1e-3


class CustomLoss(Section):
    type: Literal["custom"] = "custom"
    import_path: str
    kwargs: dict[str, Any] = {}


Loss: TypeAlias = Annotated[DefaultLoss | IPOLoss | CustomLoss, typed_union("default")]


class TrainerCkptConfig(CkptConfig):
    skip_progress: bool = False
    skip_scheduler: bool = False
    skip_dataloader: bool = False
    skip_optimizer: bool = False


class TrainerLogConfig(Section):
    level: str | None = None
    vf_level: str | None = None
    json_logging: bool = False
    log_data: bool = False
    interval: Annotated[float, Field(gt=0)] = 10.0
    ranks_filter: list[int] = [0]


class MetricsServerConfig(Section):
    port: Annotated[int, Field(ge=1, le=65535)] = 8000
    host: str = "0.0.0.0"


MatmulPrecision = Literal["highest", "high", "medium"]


class TrainerConfig(Section):
    model: ModelConfig = ModelConfig()
    tokenizer: TokenizerConfig | None = None
    data: TrainerDataConfig = TrainerDataConfig()
    loss: Loss = DefaultLoss()
    optim: Optimizer = AdamWConfig()
    scheduler: Scheduler = ConstantScheduler()
    ckpt: TrainerCkptConfig | None = None
    resume: ResumeConfig | None = None
    weight_broadcast: WeightBroadcast | None = None
    rollout_transport: RolloutTransport | None = None
    log: TrainerLogConfig = TrainerLogConfig()
    monitors: MonitorsConfig = MonitorsConfig()
    output_dir: str | None = None
    matmul_precision: MatmulPrecision = "high"
    max_steps: SanePosInt | None = None
    enable_router_replay: bool = False
    memory_profiler_path: str | None = None
    gc: GCConfig | None = GCConfig()
    trace_path: str | None = None
    dist_timeout_seconds: SanePosInt = 3600
    heartbeat: HeartbeatConfig | None = None
    metrics_server: MetricsServerConfig | None = None
    enable_token_export: bool = False
    env_vars: EnvVars = {}
