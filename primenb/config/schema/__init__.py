"""pydantic models of the prime-rl RL and SFT configs (`extra="forbid"` throughout)."""

from primenb.config.schema.rl import RLConfig
from primenb.config.schema.sft import SFTConfig

__all__ = ["RLConfig", "SFTConfig"]
