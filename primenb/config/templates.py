"""Starter configs for `%prime_train init` / `primenb init`: commented, valid by construction."""

from __future__ import annotations

from primenb.errors import PrimenbError
from primenb.protocol.fields import DEFAULT_MODEL as TINY_MODEL

DEFAULT_ENV = "reverse-text"


def _is_tiny(model: str) -> bool:
    return model.startswith("primenb/")


def rl_template(model: str = TINY_MODEL, env: str = DEFAULT_ENV, *, lora: bool = False) -> str:
    tiny = _is_tiny(model)
    lines = [
        "# primenb starter: GRPO reinforcement learning (prime-rl rl.toml format).",
        f"# Model {model}, environment {env}." + (" Runs on a CPU in minutes; nothing to download." if tiny else ""),
        "# Validate it with %%rltoml NAME, launch it with %prime_train NAME.",
        "",
        f"max_steps = {300 if tiny else 20}  # optimizer steps",
        f"seq_len = {256 if tiny else 2048}  # longest prompt + completion, in tokens",
        "",
        "[model]",
        f'name = "{model}"' + ("  # embedded byte-level Qwen2 (~0.6M params); sizes: -xs -s -m" if tiny else ""),
        "",
        "[orchestrator]",
        f"batch_size = {32 if tiny else 128}  # rollouts per step; a multiple of group_size",
        f"group_size = {8 if tiny else 16}  # completions sampled per prompt (the GRPO group)",
        "",
        "[orchestrator.train.sampling]",
        f"max_completion_tokens = {48 if tiny else 128}",
        "temperature = 1.0",
        "",
        "# One [[orchestrator.train.source]] block per environment the run trains on.",
        "[[orchestrator.train.source]]",
        f'name = "{env}"',
        "",
        "[orchestrator.train.source.env.taskset]",
        f'id = "{env}"',
        "",
        "[orchestrator.train.source.env.agent.harness]",
        'id = "null"  # single-turn: the model answers once',
        "",
        "[orchestrator.train.source.env.agent.runtime]",
        'type = "subprocess"',
        "",
        "[orchestrator.eval]",
        f"interval = {50 if tiny else 10}  # evaluate every N steps",
        "num_examples = 100  # held-out prompts, greedy decoding",
        "",
        "[[orchestrator.eval.source]]",
        f'name = "{env}"',
        "",
        "[orchestrator.eval.source.env.taskset]",
        f'id = "{env}"',
        "",
        "[trainer.optim]",
        f"lr = {('5e-4' if lora else '5e-5') if tiny else ('1e-5' if lora else '3e-6')}",
        "max_norm = 1.0  # gradient clipping",
        "",
    ]
    if lora:
        lines += [
            "# LoRA: train low-rank adapters instead of every weight; checkpoints hold the adapter only.",
            "[trainer.model.lora]",
            "rank = 16",
            "alpha = 32",
            "",
        ]
    lines += [
        "[ckpt]  # a checkpoint every `interval` steps, and always at the end",
        "interval = 100",
        "keep_last = 2",
        "",
    ]
    if not tiny:
        lines += [
            "# Settings for the vLLM server that remote backends start; the local engine samples in-process.",
            "[inference]",
            "",
        ]
    lines += [
        "# primenb's own settings (stripped when the config goes to upstream prime-rl or the prime CLI).",
        "[primenb]",
        "seed = 0",
        "sample_every = 10  # sampled completions at most every N steps (SFT: within ~2% of the time)",
    ]
    if tiny:
        lines += ["sft_warmup_steps = 200  # teach the random-init model the answer format before RL"]
    return "\n".join(lines) + "\n"


def sft_template(model: str = TINY_MODEL, env: str = DEFAULT_ENV, *, lora: bool = False) -> str:
    tiny = _is_tiny(model)
    lines = [
        "# primenb starter: supervised fine-tuning (prime-rl sft.toml format).",
        f"# Model {model}; data from {env}."
        + (" Runs on a CPU in about a minute; nothing to download." if tiny else ""),
        "# Validate it with %%rltoml NAME, launch it with %prime_train NAME.",
        "",
        f"max_steps = {400 if tiny else 100}",
        "",
        "[model]",
        f'name = "{model}"',
        "",
    ]
    if lora:
        lines += ["[model.lora]  # train adapters only", "rank = 16", "alpha = 32", ""]
    lines += [
        "[data]",
        f'name = "{env}"  # a built-in environment id, or a Hugging Face dataset',
        f"batch_size = {64 if tiny else 32}  # examples per optimizer step",
        f"micro_batch_size = {64 if tiny else 1}  # examples per forward pass; batch_size must be a multiple",
        f"seq_len = {128 if tiny else 4096}",
        "",
        "[optim]",
        f"lr = {('2e-3' if lora else '1e-3') if tiny else '2e-5'}",
        "",
        "[eval]",
        f"interval = {100 if tiny else 25}",
        "num_examples = 50",
        "",
        "[[eval.source]]",
        f'name = "{env}"',
        "",
        "[eval.source.env.taskset]",
        f'id = "{env}"',
        "",
        "[ckpt]",
        "",
        "[primenb]",
        "seed = 0",
    ]
    return "\n".join(lines) + "\n"


def starter(model: str | None = None, env: str | None = None, *, sft: bool = False, lora: bool = False) -> str:
    """A starter config; it is validated here so `init` never writes a broken file."""
    from primenb.config import check

    make = sft_template if sft else rl_template
    text = make(model or TINY_MODEL, env or DEFAULT_ENV, lora=lora)
    outcome = check(text, mode="sft" if sft else "rl")
    if not outcome.report.ok:  # a bug in the template, not the user's fault
        raise PrimenbError("internal error: the starter config does not validate:\n" + outcome.report.to_text())
    return text
