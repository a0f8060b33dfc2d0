"""`[orchestrator]`: rollouts, sampling, environments (sources) and evals."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import Field, model_validator

from primenb.config.schema.algo import Algo, GRPOAlgo, SourceAlgo
from primenb.config.schema.common import (
    CkptConfig,
    EnvVars,
    HeartbeatConfig,
    NonNegInt,
    OpenSection,
    OrchestratorMonitorsConfig,
    PosInt,
    ResumeConfig,
    RolloutTransport,
    SanePosInt,
    Section,
    TokenizerConfig,
    VLMConfig,
    WeightBroadcast,
    typed_union,
)


class TasksetConfig(OpenSection):
    """`env.taskset`: `id` plus any arguments the taskset takes."""

    id: str | None = None


class EnvConfig(OpenSection):
    """`env`: verifiers' own config (checked by `primenb.config.vfcheck` where verifiers is
    installed); here only the taskset id, which primenb's engine reads."""

    taskset: TasksetConfig | None = None


class TrainSamplingConfig(Section):
    temperature: Annotated[float, Field(ge=0, le=2)] = 1.0
    max_completion_tokens: SanePosInt | None = None
    extra_body: dict[str, Any] = {}


class EvalSamplingConfig(Section):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: float | None = None  # upstream bounds neither top_p nor min_p's top here
    top_k: int | None = None
    min_p: Annotated[float, Field(ge=0)] | None = None
    max_completion_tokens: SanePosInt | None = None
    reasoning_effort: Literal["minimal", "low", "medium", "high"] | None = None
    extra_body: dict[str, Any] | None = None


class AdvRangeGate(Section):
    type: Literal["advantage_range"] = "advantage_range"
    reject_min: float = 0.0
    reject_max: float = 0.0

    @model_validator(mode="after")
    def _ordered(self) -> AdvRangeGate:
        if self.reject_min > self.reject_max:
            raise ValueError(f"reject_min ({self.reject_min}) must not exceed reject_max ({self.reject_max})")
        return self


class StandardSampler(Section):
    type: Literal["standard"] = "standard"


class DifficultyPool(Section):
    threshold: float
    weight: Annotated[float, Field(ge=0)]


class DifficultyPoolSampler(Section):
    type: Literal["difficulty_pool"] = "difficulty_pool"
    pools: dict[str, DifficultyPool] = {
        "hard": DifficultyPool(threshold=0.25, weight=0.2),
        "normal": DifficultyPool(threshold=0.75, weight=1.0),
        "easy": DifficultyPool(threshold=1.0, weight=0.2),
    }
    seed: int = 42

    @model_validator(mode="after")
    def _pools(self) -> DifficultyPoolSampler:
        thresholds = [pool.threshold for pool in self.pools.values()]
        if not self.pools:
            raise ValueError("a difficulty_pool sampler needs at least one pool")
        if len(set(thresholds)) != len(thresholds):
            raise ValueError(f"difficulty pool thresholds must be unique (got {thresholds})")
        if not any(pool.weight > 0 for pool in self.pools.values()):
            raise ValueError("at least one difficulty pool needs a weight above 0")
        return self


TaskSampler: TypeAlias = Annotated[StandardSampler | DifficultyPoolSampler, typed_union("standard")]


class CurriculumConfig(Section):
    sampler: TaskSampler = StandardSampler()
    gates: dict[str, AdvRangeGate] = {}


class TrainSourceConfig(Section):
    env: EnvConfig = EnvConfig()
    serve: dict[str, Any] | None = None
    name: str | None = None
    ratio: Annotated[float, Field(gt=0)] = 1.0
    sampling: TrainSamplingConfig | None = None
    group_size: PosInt | None = None
    algo: SourceAlgo | None = None
    curriculum: CurriculumConfig | None = None


class EvalSourceConfig(Section):
    env: EnvConfig = EnvConfig()
    serve: dict[str, Any] | None = None
    name: str | None = None
    num_examples: int | None = None
    group_size: PosInt | None = None
    sampling: EvalSamplingConfig | None = None
    interval: PosInt = 100
    ratio: Annotated[float, Field(gt=0)] = 1.0


class TrainConfig(Section):
    source: list[TrainSourceConfig] = []
    sampling: TrainSamplingConfig = TrainSamplingConfig()
    filter_zero_advantages: bool = True


class EvalConfig(Section):
    source: list[EvalSourceConfig] = []
    sampling: EvalSamplingConfig = EvalSamplingConfig()
    num_examples: int = -1
    group_size: PosInt = 1
    interval: PosInt = 100
    skip_first_step: bool = False
    retrigger_on_resume: bool = False


class LoraRefConfig(Section):
    name: str | None = None
    rank: PosInt | None = None
    alpha: Annotated[float, Field(ge=0)] | None = None


class ClientConfig(Section):
    base_url: str | list[str] = "http://localhost:8000/v1"
    api_key_var: str = "VLLM_API_KEY"
    wait_for_ready_timeout: int = 1800
    headers: dict[str, str] = {}
    headers_from_env: dict[str, str] = {}
    extra_headers_from_state: dict[str, str] = {}
    skip_model_check: bool = False
    admin_base_url: str | list[str] | None = None


class OrchestratorModelConfig(Section):
    name: str = "Qwen/Qwen3-0.6B"
    trust_remote_code: bool = False
    vlm: VLMConfig | None = None
    lora: LoraRefConfig | None = None
    client: ClientConfig = ClientConfig()


class RendererConfig(OpenSection):
    """Renderer options are checked by the `renderers` package where it is installed. Upstream
    needs `name` in a written table (it is the union's tag)."""

    name: str


class OrchestratorLogConfig(Section):
    level: str | None = None
    vf_level: str | None = None
    json_logging: bool = False
    log_data: bool = False
    interval: Annotated[float, Field(gt=0)] = 10.0


class ConcurrencyConfig(Section):
    initial_inflight: PosInt | None = None
    min_inflight: PosInt = 1
    max_inflight: PosInt | None = 1024


class OrchestratorCkptConfig(CkptConfig):
    wait_for_weights_timeout: PosInt | None = None
    skip_progress: bool = False


class OrchestratorConfig(Section):
    algo: Algo = GRPOAlgo()
    model: OrchestratorModelConfig = OrchestratorModelConfig()
    train: TrainConfig = TrainConfig()
    eval: EvalConfig | None = None
    tokenizer: TokenizerConfig | None = None
    renderer: RendererConfig = RendererConfig(name="auto")
    log: OrchestratorLogConfig = OrchestratorLogConfig()
    monitors: OrchestratorMonitorsConfig = OrchestratorMonitorsConfig()
    ckpt: OrchestratorCkptConfig | None = None
    resume: ResumeConfig | None = None
    weight_broadcast: WeightBroadcast | None = None
    rollout_transport: RolloutTransport | None = None
    output_dir: str | None = None
    tasks_per_minute: PosInt | None = None
    env_server_base_port: Annotated[int, Field(ge=1, le=65535)] = 5000
    batch_size: PosInt | None = None
    token_batch_size: PosInt | None = None
    concurrency: ConcurrencyConfig = ConcurrencyConfig()
    group_size: PosInt = 1
    seq_len: SanePosInt = 2048
    num_train_workers: PosInt = 1
    pad_to_multiple_of: PosInt = 1
    max_steps: SanePosInt | None = None
    max_off_policy_steps: NonNegInt = 8
    heartbeat: HeartbeatConfig | None = None
    env_vars: EnvVars = {}
    collect_inference_metrics: bool = True
    inference_metrics_roles: list[Literal["prefill", "decode"]] | None = None
