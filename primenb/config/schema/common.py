"""Building blocks shared by the RL and SFT schemas (prime-rl-configs 0.4.0 shapes)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias, Union, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    GetCoreSchemaHandler,
    Tag,
    ValidationInfo,
    model_validator,
)
from pydantic_core import CoreSchema, PydanticCustomError

from primenb.protocol.fields import DEFAULT_BACKEND
from primenb.tracker_kinds import TrackerKind

# Validation runs twice. The lax pass decides errors exactly as upstream's loader (pydantic lax
# mode: "20" and true are integers there). The sanity pass (strict, context SANITY) re-checks
# the same data; what only it rejects becomes a warning: upstream runs it, but it is a mistake.
SANITY = {"sanity": True}


class Section(BaseModel):
    """A TOML table: unknown keys are errors, the string "None" means None (as upstream)."""

    model_config = ConfigDict(extra="forbid", validate_default=False)

    @model_validator(mode="before")
    @classmethod
    def _none_strings(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(v == "None" for v in data.values()):
            return {k: (None if v == "None" else v) for k, v in data.items()}
        return data


class OpenSection(Section):
    """A table whose extra keys are passed through (vLLM options, taskset arguments)."""

    model_config = ConfigDict(extra="allow", validate_default=False)


def _sane_min(bound: int) -> AfterValidator:
    def check(value: Any, info: ValidationInfo) -> Any:
        if info.context and info.context.get("sanity") and value is not None and value < bound:
            kind = "greater_than_equal"
            raise PydanticCustomError(kind, "Input should be greater than or equal to {ge}", {"ge": bound})
        return value

    return AfterValidator(check)


def typed_union(default: str | None, key: str = "type") -> TypedUnion:
    """`Annotated[A | B, typed_union(default)]`: a union switched by its `key`; upstream fills an
    absent tag from the field's default model, so `default=None` (an optional field) makes the
    tag required. Each member is tagged with its own `key` default."""
    return TypedUnion(default, key)


class TypedUnion:
    """The `Annotated` marker `typed_union` makes: builds the tagged union pydantic validates."""

    def __init__(self, default: str | None, key: str = "type") -> None:
        self.default = default
        self.key = key

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        key, default = self.key, self.default

        def pick(value: Any) -> str | None:
            if isinstance(value, dict):
                tag = value.get(key, default)
                return tag if isinstance(tag, str) else repr(tag)
            found: str | None = getattr(value, key, default)
            return found

        tagged = tuple(Annotated[c, Tag(c.model_fields[key].default)] for c in get_args(source))
        return handler.generate_schema(Annotated[Union[tagged], Discriminator(pick)])  # noqa: UP007


# variables the prime-rl launcher sets itself (GPU partitioning, the shared W&B run): a component's
# `env_vars` may not set them (upstream's `reject_protected_env_vars`)
PROTECTED_ENV_VARS = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "PRL_RUN_ID",
        "PRL_RUN_NAME",
        "WANDB_RUN_ID",
        "WANDB_SHARED_MODE",
        "WANDB_SHARED_LABEL",
        "WANDB_SHARED_PRIMARY",
        "WANDB_SHARED_FINISHER",
    }
)


def _unprotected(env_vars: dict[str, str]) -> dict[str, str]:
    clobbered = sorted(PROTECTED_ENV_VARS & env_vars.keys())
    if clobbered:
        raise ValueError(
            f"env_vars cannot set {', '.join(clobbered)}: the prime-rl launcher sets "
            f"{'it' if len(clobbered) == 1 else 'them'} itself"
        )
    return env_vars


EnvVars: TypeAlias = Annotated[dict[str, str], AfterValidator(_unprotected)]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
# primenb's own integers (`[primenb]`) feed torch and SQLite: 64-bit, unlike upstream's, which
# take any size (a located warning there, `limits.value_problems`)
OwnNonNegInt = Annotated[int, Field(ge=0, le=2**63 - 1)]
OwnPosInt = Annotated[int, Field(ge=1, le=2**63 - 1)]
# Bounds upstream does not check (it takes max_steps = 0 or seq_len = -1): warnings only.
SanePosInt = Annotated[int, _sane_min(1)]
SaneNonNegInt = Annotated[int, _sane_min(0)]


class RunConfig(Section):
    name: str | None = None
    dir: str | None = None


class LogConfig(Section):
    level: str | None = None
    json_logging: bool = False


class CkptConfig(Section):
    output_dir: str | None = None
    interval: PosInt | None = None
    keep_last: PosInt | None = None
    keep_interval: PosInt | None = None


class ResumeConfig(Section):
    step: PosInt | None = None
    dir: str | None = None


class WandbConfig(Section):
    project: str = "prime-rl"
    entity: str | None = None
    name: str | None = None
    group: str | None = None
    tags: list[str] | None = None
    offline: bool = False


class FileMonitorConfig(Section):
    path: str = "metrics.jsonl"


class PrimeMonitorConfig(Section):
    name: str | None = None


class SharedMonitorsConfig(Section):
    wandb: WandbConfig | None = None
    file: FileMonitorConfig | None = None
    prime: PrimeMonitorConfig | None = None


class MonitorsConfig(Section):
    """Monitors of a trainer (RL's or SFT's): the file monitor is on by default."""

    wandb: WandbConfig | None = None
    file: FileMonitorConfig | None = FileMonitorConfig()


class OrchestratorMonitorsConfig(MonitorsConfig):
    """The orchestrator also reports to the Prime platform."""

    prime: PrimeMonitorConfig | None = None


class VLMConfig(Section):
    vision_encoder_attr: str
    language_model_attr: str
    freeze_vision_encoder: bool = True


class SharedModelConfig(Section):
    name: str = "Qwen/Qwen3-0.6B"
    vlm: VLMConfig | None = None


class TokenizerConfig(Section):
    name: str | None = None
    trust_remote_code: bool | None = None
    chat_template: str | None = None


class FilesystemBroadcast(Section):
    type: Literal["filesystem"] = "filesystem"


class NcclBroadcast(Section):
    type: Literal["nccl"] = "nccl"
    host: str = "localhost"
    port: int = 29501
    timeout: int = 1200
    quantize_in_weight_transfer: bool = False


class NixlBroadcast(Section):
    type: Literal["nixl"] = "nixl"
    host: str = "localhost"
    port: int = 8001
    timeout: int = 1200
    session_id: str | None = None


_Broadcast: TypeAlias = FilesystemBroadcast | NcclBroadcast | NixlBroadcast
WeightBroadcast: TypeAlias = Annotated[_Broadcast, typed_union("filesystem")]
# The top-level (shared) table defaults to None upstream, so there `type` is required.
SharedWeightBroadcast: TypeAlias = Annotated[_Broadcast, typed_union(None)]


class FilesystemTransport(Section):
    type: Literal["filesystem"] = "filesystem"


class ZmqTransport(Section):
    type: Literal["zmq"] = "zmq"
    host: str = "localhost"
    port: int = 5555
    hwm: int = 10


RolloutTransport: TypeAlias = Annotated[FilesystemTransport | ZmqTransport, typed_union("zmq")]


class SlurmConfig(Section):
    job_name: str = "prime-rl"
    project_dir: str = "."
    template_path: str | None = None
    partition: str = "cluster"
    nodelist: str | None = None
    exclude: str | None = None
    account: str | None = None
    time: str | None = None
    pre_run_command: str | None = None
    cleanup_grace_period: NonNegInt = 3600
    shared_fs: bool = True


class HeartbeatConfig(Section):
    url: str


class GCConfig(Section):
    interval: PosInt | None = 50


class LoraConfig(Section):
    rank: PosInt = 16
    alpha: Annotated[float, Field(ge=0)] = 32.0
    dropout: Annotated[float, Field(ge=0, le=1)] = 0.0
    target_modules: list[str] = [
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
        "experts",
        "fc1_latent_proj",
        "fc2_latent_proj",
    ]
    modules_to_save: list[str] = []


class OptimBase(Section):
    lr: Annotated[float, Field(ge=0)] = 1e-6
    weight_decay: Annotated[float, Field(ge=0)] = 0.01
    max_norm: Annotated[float, Field(ge=0)] | None = 1.0


class AdamWConfig(OptimBase):
    type: Literal["adamw"] = "adamw"
    betas1: Annotated[float, Field(ge=0)] = 0.9
    betas2: Annotated[float, Field(ge=0)] = 0.999


class SGDConfig(OptimBase):
    type: Literal["sgd"] = "sgd"
    nesterov: bool = True
    momentum: float = 0.9


class MuonConfig(OptimBase):
    type: Literal["muon"] = "muon"
    mu: Annotated[float, Field(ge=0)] = 0.95
    betas1: Annotated[float, Field(ge=0)] = 0.9
    betas2: Annotated[float, Field(ge=0)] = 0.95


class SignSGDConfig(OptimBase):
    type: Literal["sign_sgd"] = "sign_sgd"


Optimizer: TypeAlias = Annotated[AdamWConfig | SGDConfig | MuonConfig | SignSGDConfig, typed_union("adamw")]


class ConstantScheduler(Section):
    type: Literal["constant"] = "constant"


class LinearScheduler(Section):
    type: Literal["linear"] = "linear"
    warmup_steps: NonNegInt = 10
    decay_steps: NonNegInt = 10
    min_lr: Annotated[float, Field(ge=0)] = 0.0


class CosineScheduler(Section):
    type: Literal["cosine"] = "cosine"
    warmup_steps: NonNegInt = 10
    min_lr: Annotated[float, Field(ge=0)] = 0.0


Scheduler: TypeAlias = Annotated[ConstantScheduler | LinearScheduler | CosineScheduler, typed_union("constant")]


class PrimenbMonitorSettings(Section):
    refresh_seconds: Annotated[float, Field(ge=0.1)] = 0.5
    metrics: list[str] = ["reward", "loss"]
    max_points: Annotated[int, Field(ge=100, le=2**63 - 1)] = 2000


class PrimenbPrivacySettings(Section):
    # "deny": no prompt/completion text is written anywhere in the run directory or trace.
    data_collection: Literal["allow", "deny"] = "allow"
    record_hostname: bool = True
    record_git: bool = True


class PrimenbSettings(Section):
    """primenb's own settings: the one table added to the upstream schema, stripped upstream."""

    backend: str = DEFAULT_BACKEND  # a backend kind, an ssh:// or slurm:// URL, or a saved backend name
    # keys prime-rl 0.4.0 does not know become warnings (a platform running a newer prime-rl)
    lenient: bool = False
    seed: OwnNonNegInt = 0
    logging_steps: OwnPosInt = 1
    sample_every: OwnPosInt = 10  # sampled completions at most every N steps; SFT keeps them to ~2% of the time
    init_from: str | None = None
    # A continuation (set by `%prime_harness apply`): init_from's step. The run trains steps
    # start_step+1 .. max_steps and numbers its metrics and checkpoints on from there.
    start_step: OwnNonNegInt = 0
    # Before RL, train this many SFT steps on the environment's reference answers: a random-init
    # model (the embedded default) otherwise rarely samples a rewarded completion.
    sft_warmup_steps: OwnNonNegInt = 0
    # RL: the run fails when a reward function fails (raises, or returns no finite number) on more
    # than this share of the completions it has scored so far; below it, failures score 0.0.
    reward_error_limit: Annotated[float, Field(ge=0, le=1)] = 0.5
    monitor: PrimenbMonitorSettings = PrimenbMonitorSettings()
    # experiment trackers fed with the run's metric rows (docs/trackers.md); [monitors.wandb] adds wandb
    report_to: list[TrackerKind] = []
    privacy: PrimenbPrivacySettings = PrimenbPrivacySettings()
