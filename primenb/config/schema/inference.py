"""`[inference]`: the vLLM server. `[inference.vllm]` forwards any extra key to vLLM."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, model_validator

from primenb.config.schema.common import (
    EnvVars,
    LogConfig,
    OpenSection,
    PosInt,
    SanePosInt,
    Section,
    SlurmConfig,
    WeightBroadcast,
    typed_union,
)


class InferenceLogConfig(LogConfig):
    vf_level: str | None = None
    log_data: bool = False
    interval: Annotated[float, Field(gt=0)] = 10.0


class ServerConfig(Section):
    host: str | None = None
    port: int = 8000
    liveness_timeout_seconds: Annotated[float, Field(gt=0)] = 30.0


class VllmRouterConfig(Section):
    type: Literal["vllm-router"] = "vllm-router"
    policy: str = "consistent_hash"


# the scorers the llm-d router knows (upstream's `validate_scorers`: any other name is refused)
LlmdScorer = Literal[
    "prefix-cache-scorer",
    "precise-prefix-cache-scorer",
    "queue-scorer",
    "kv-cache-utilization-scorer",
    "active-request-scorer",
    "load-aware-scorer",
    "running-requests-size-scorer",
    "token-load-scorer",
    "latency-scorer",
    "session-affinity-scorer",
    "lora-affinity-scorer",
]


class LlmdRouterConfig(Section):
    type: Literal["llm-d"] = "llm-d"
    scorers: dict[LlmdScorer, float] = {"active-request-scorer": 2.0, "prefix-cache-scorer": 3.0}
    prefill_scorer_overrides: dict[LlmdScorer, float] = {"kv-cache-utilization-scorer": 2.0, "queue-scorer": 2.0}
    decode_scorer_overrides: dict[LlmdScorer, float] = {}
    non_cached_tokens: int = 16
    decode_sidecar_port: int = 8300


# `[inference.router]` is optional upstream: a table without `type` is refused (no default member)
RouterConfig: TypeAlias = Annotated[VllmRouterConfig | LlmdRouterConfig, typed_union(None)]


# the ranks vLLM serves LoRA adapters of (upstream rounds max_lora_rank up to one of them)
VLLM_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


class VLLMConfig(OpenSection):
    model: str = "Qwen/Qwen3-0.6B"
    dtype: Literal["auto", "float16", "bfloat16", "float32"] = "auto"
    max_model_len: SanePosInt | None = None
    enforce_eager: bool = False
    trust_remote_code: bool = False
    chat_template: str | None = None
    tool_call_parser: str | None = "auto"
    reasoning_parser: str | None = "auto"
    rope_scaling: dict[str, Any] | str | None = None
    tensor_parallel_size: SanePosInt = 1
    data_parallel_size: PosInt = 1
    data_parallel_size_local: PosInt | None = None
    data_parallel_rpc_port: Annotated[int, Field(ge=1, le=65535)] = 13345
    api_server_count: Annotated[int, Field(ge=0)] = 1
    seed: int = 0
    gpu_memory_utilization: float = 0.9  # upstream bounds it nowhere (vLLM refuses at start)
    enable_prefix_caching: bool | None = None
    quantization: str | None = None
    enable_lora: bool = False
    max_loras: SanePosInt = 8
    max_cpu_loras: SanePosInt = 100
    max_lora_rank: SanePosInt | None = None
    lora_target_modules: list[str] | None = None
    enable_expert_parallel: bool = False
    all2all_backend: Literal[
        "allgather_reducescatter",
        "deepep_high_throughput",
        "deepep_low_latency",
        "flashinfer_nvlink_one_sided",
        "flashinfer_nvlink_two_sided",
    ] = "allgather_reducescatter"
    enable_eplb: bool = False
    enable_dbo: bool = False
    enable_return_routed_experts: bool = False

    @model_validator(mode="after")
    def _lora_rank(self) -> VLLMConfig:
        if self.max_lora_rank is not None and self.max_lora_rank > max(VLLM_LORA_RANKS):
            raise ValueError(f"max_lora_rank = {self.max_lora_rank} exceeds vLLM's maximum of {max(VLLM_LORA_RANKS)}")
        return self


class InferenceSingleNode(Section):
    type: Literal["single_node"] = "single_node"
    gpus_per_node: int = 8


class InferenceMultiNode(Section):
    type: Literal["multi_node"] = "multi_node"
    gpus_per_node: int = 8
    num_nodes: PosInt = 2


class InferenceDisaggregated(Section):
    type: Literal["disaggregated"] = "disaggregated"
    gpus_per_node: int = 8
    num_prefill_replicas: PosInt = 1
    num_decode_replicas: PosInt = 1
    prefill_nodes_per_replica: PosInt = 1
    decode_nodes_per_replica: PosInt = 1
    prefill_port: int = 8100
    decode_port: int = 8200
    prefill_env_vars: EnvVars = {}
    decode_env_vars: EnvVars = {}
    prefill_vllm_overrides: dict[str, Any] = {}
    decode_vllm_overrides: dict[str, Any] = {}


InferenceDeployment: TypeAlias = Annotated[
    InferenceSingleNode | InferenceMultiNode | InferenceDisaggregated, typed_union("single_node")
]


class CPUOffloadTier(Section):
    num_bytes: Annotated[int, Field(gt=0)]


class DiskOffloadTier(Section):
    path: str


class NativeKVCacheOffload(Section):
    type: Literal["native"] = "native"
    # required here: upstream's `valid_tiers` refuses a table without a cpu tier (disk-only
    # offload is supported by neither backend); a missing key names it exactly
    cpu: CPUOffloadTier
    disk: DiskOffloadTier | None = None


class MooncakeKVCacheOffload(NativeKVCacheOffload):
    type: Literal["mooncake"] = "mooncake"  # type: ignore[assignment]
    device_name: str = ""


# optional upstream, so a written table names its `type`
KVCacheOffload: TypeAlias = Annotated[NativeKVCacheOffload | MooncakeKVCacheOffload, typed_union(None)]


class InferenceConfig(Section):
    server: ServerConfig = ServerConfig()
    router: RouterConfig | None = VllmRouterConfig()
    backend_port: int = 8100
    vllm: VLLMConfig = VLLMConfig()
    log: InferenceLogConfig = InferenceLogConfig()
    env_vars: EnvVars = {}
    use_deep_gemm: bool = False
    weight_broadcast: WeightBroadcast | None = None
    kv_cache_offload: KVCacheOffload | None = None
    deployment: InferenceDeployment = InferenceSingleNode()
    slurm: SlurmConfig | None = None
    output_dir: str | None = None
    dry_run: bool = False
    use_pd_kv_transfer: bool = False
    enable_fp32_lm_head: bool = True
    enable_fp32_router_logits: bool = True
