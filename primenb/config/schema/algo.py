"""`[orchestrator.algo]` (and a train source's `algo`): one table per algorithm, keyed by `type`
(prime-rl-configs 0.4.0 shapes)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, TypeAlias

from pydantic import Field, model_validator

from primenb.config.schema.common import OpenSection, Section, typed_union


class FrozenModelConfig(Section):
    """An externally hosted model (teacher, sampling source): a client config plus `name`."""

    name: str
    base_url: str = "http://localhost:8000/v1"
    api_key_var: str = "VLLM_API_KEY"
    wait_for_ready_timeout: int = 1800
    headers: dict[str, str] = {}
    headers_from_env: dict[str, str] = {}
    extra_headers_from_state: dict[str, str] = {}
    skip_model_check: bool = False
    admin_base_url: list[str] | None = None

    @model_validator(mode="after")
    def _needs_base_url(self) -> FrozenModelConfig:
        if "base_url" not in self.model_fields_set:
            raise ValueError("a frozen model reference needs base_url (prime-rl only hosts the trainable policy)")
        return self


class AlgoSamplingConfig(Section):
    source: Literal["policy"] | FrozenModelConfig = "policy"


class LinearLengthPenalty(Section):
    type: Literal["linear"] = "linear"
    num_output_tokens_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.25
    num_input_tokens_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.1
    num_turns_weight: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.1


class EchoRole(Section):
    alpha: Annotated[float, Field(gt=0)] = 0.1


class EchoRoles(Section):
    system: EchoRole | None = None
    user: EchoRole | None = None
    assistant: EchoRole | None = None
    tool: EchoRole | None = None

    @model_validator(mode="after")
    def _one_role(self) -> EchoRoles:
        if not (self.system or self.user or self.assistant or self.tool):
            raise ValueError("echo needs at least one role enabled (system, user, assistant, or tool)")
        return self


class EchoFilter(Section):
    import_path: str
    kwargs: dict[str, Any] = {}


class AlgoBase(Section):
    sampling: AlgoSamplingConfig = AlgoSamplingConfig()
    # the loss the algorithm trains with: the on-policy ones (rl, ref_kl) need the live policy's
    # own sampling logprobs; only sft's cross-entropy learns from a frozen model's tokens
    on_policy: ClassVar[bool] = True

    @model_validator(mode="after")
    def _source_fits_loss(self) -> AlgoBase:
        frozen = self.sampling.source != "policy"
        name = type(self).model_fields["type"].default
        if self.on_policy and frozen:
            raise ValueError(
                f"algorithm '{name}' trains on the policy's own sampling logprobs, but sampling.source "
                "is a frozen model; use the 'sft' algorithm to distill a frozen model's tokens"
            )
        if not self.on_policy and not frozen:
            raise ValueError(
                f"algorithm '{name}' needs a teacher to sample rollouts from (cross-entropy on the "
                "policy's own tokens is no distillation target): set sampling.source to a hosted "
                "model (name + base_url)"
            )
        return self


class GRPOAlgo(AlgoBase):
    type: Literal["grpo"] = "grpo"
    length_penalty: LinearLengthPenalty | None = None


class EchoAlgo(GRPOAlgo):
    type: Literal["echo"] = "echo"  # type: ignore[assignment]
    roles: EchoRoles = EchoRoles(tool=EchoRole())
    filter: EchoFilter | None = None


class MaxRLAlgo(AlgoBase):
    type: Literal["max_rl"] = "max_rl"


class RAEAlgo(AlgoBase):
    type: Literal["rae"] = "rae"
    decay: Annotated[float, Field(ge=0.0, lt=1.0)] = 0.95


class HierarchicalGRPOAlgo(AlgoBase):
    type: Literal["hierarchical_grpo"] = "hierarchical_grpo"
    episode_agents: Annotated[list[str], Field(min_length=1)]


class OPDAlgo(AlgoBase):
    type: Literal["opd"] = "opd"
    teacher: FrozenModelConfig


class AlgoRenderer(OpenSection):
    name: str = "auto"


class OPSDAlgo(AlgoBase):
    type: Literal["opsd"] = "opsd"
    demo_key: str = "demonstration"
    template: str = "Here is an example of an expert response:\n<demonstration>\n{demonstration}\n</demonstration>"
    renderer: AlgoRenderer = AlgoRenderer()


class SFTAlgo(AlgoBase):
    type: Literal["sft"] = "sft"
    on_policy: ClassVar[bool] = False


_AnyAlgo: TypeAlias = GRPOAlgo | EchoAlgo | MaxRLAlgo | RAEAlgo | HierarchicalGRPOAlgo | OPDAlgo | OPSDAlgo | SFTAlgo
Algo: TypeAlias = Annotated[_AnyAlgo, typed_union("grpo")]  # `[orchestrator.algo]`: grpo when no type
SourceAlgo: TypeAlias = Annotated[_AnyAlgo, typed_union(None)]  # a source's optional override names its type
