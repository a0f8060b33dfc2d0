"""The one builder of tiny configs for tests and benchmarks: the embedded byte-level model, the
reverse-text task (or any environment), a few steps. Each knob is a keyword; the TOML is what a
user would write, so tests go through the same validation as a notebook cell."""

from __future__ import annotations


def rl_toml(
    *,
    steps: int = 4,
    env: str = "reverse-text",
    env_args: str = "",
    seq_len: int = 128,
    batch_size: int = 8,
    group_size: int = 4,
    max_tokens: int = 16,
    lr: float = 1e-4,
    lora: bool = False,
    model: str = "primenb/tiny-byte",
    primenb: str = "",
    extra: str = "",
) -> str:
    """An RL (GRPO) config; ``env_args`` are TOML lines under the taskset table, ``primenb`` lines
    under ``[primenb]``, ``extra`` any further tables."""
    lora_table = "\n[trainer.model.lora]\nrank = 4\nalpha = 8\n" if lora else ""
    return f"""max_steps = {steps}
seq_len = {seq_len}

[model]
name = "{model}"

[orchestrator]
batch_size = {batch_size}
group_size = {group_size}

[orchestrator.train.sampling]
max_completion_tokens = {max_tokens}

[[orchestrator.train.source]]
name = "{env}"

[orchestrator.train.source.env.taskset]
id = "{env}"
{env_args}
[trainer.optim]
lr = {lr}
{lora_table}
[primenb]
{primenb}
{extra}"""


def agent_tables(head: str = "orchestrator.train.source", max_turns: int | None = None) -> str:
    """A source's ``env.agent`` tables as upstream's multi-turn examples write them: harness
    ``null`` in runtime ``subprocess`` (and a cap on model turns)."""
    turns = f"max_turns = {max_turns}\n" if max_turns else ""
    return (
        f"\n[{head}.env.agent]\n{turns}"
        f'\n[{head}.env.agent.harness]\nid = "null"\n'
        f'\n[{head}.env.agent.runtime]\ntype = "subprocess"\n'
    )


def episode_toml(env: str, env_args: str = "", *, max_turns: int | None = None, **kwargs: object) -> str:
    """An RL config training ``env`` on verifiers' episodes (its agent seat after its taskset)."""
    toml = rl_toml(env=env, env_args=env_args, **kwargs)  # type: ignore[arg-type]
    return toml.replace("[trainer.optim]", agent_tables(max_turns=max_turns) + "\n[trainer.optim]")


def sft_toml(
    *,
    steps: int = 10,
    env: str = "reverse-text",
    seq_len: int = 64,
    batch_size: int = 16,
    micro_batch_size: int | None = None,
    lr: float = 1e-3,
    ckpt_interval: int | None = None,
    model: str = "primenb/tiny-byte",
    primenb: str = "seed = 1",
    extra: str = "",
) -> str:
    """An SFT config on an environment's ideal answers."""
    ckpt = f"\n[ckpt]\ninterval = {ckpt_interval}\n" if ckpt_interval is not None else ""
    return f"""max_steps = {steps}

[model]
name = "{model}"

[data]
name = "{env}"
batch_size = {batch_size}
micro_batch_size = {micro_batch_size or batch_size}
seq_len = {seq_len}

[optim]
lr = {lr}
{ckpt}
[primenb]
{primenb}
{extra}"""
