"""Resolved config -> plan -> TRL arguments (pure mapping, no torch), and launch_command."""

from __future__ import annotations

import sys

import pytest

from primenb.engine import launch_command
from primenb.engine.plan import (
    PlanError,
    build_plan,
    grpo_args,
    grpo_batch,
    sft_args,
    sft_batch,
)
from tests.engine.conftest import deep_update, rl_config, sft_config


def test_detects_mode_and_reads_fields() -> None:
    rl = build_plan(rl_config())
    assert rl.mode == "rl" and rl.model_name == "primenb/tiny-byte" and rl.max_steps == 6
    assert rl.sources[0].env_id == "reverse-text" and rl.sources[0].env_args["num_train"] == 2000
    sft = build_plan(sft_config())
    assert sft.mode == "sft" and sft.data["micro_batch_size"] == 64 and sft.eval is not None
    with pytest.raises(PlanError):
        build_plan({"max_steps": 3})


def test_grpo_mapping() -> None:
    plan = build_plan(rl_config())
    args, notes = grpo_args(plan, world_size=1, cuda=False, bf16_ok=False)
    assert args["per_device_train_batch_size"] == 16 and args["num_generations"] == 4
    assert args["max_completion_length"] == 48 and args["temperature"] == 1.0
    assert args["use_cpu"] and not args["bf16"] and not args["activation_checkpointing"]
    assert args["use_vllm"] is False and args["report_to"] == "none"
    assert args["optim"] == "adamw_torch" and args["adam_beta2"] == 0.999
    assert args["learning_rate"] == 5e-4 and args["max_grad_norm"] == 1.0
    assert args["save_strategy"] == "no" and notes == []
    gpu, _ = grpo_args(plan, world_size=1, cuda=True, bf16_ok=True)
    assert not gpu["use_cpu"] and gpu["bf16"]


def test_grpo_batch_respects_divisibility() -> None:
    assert grpo_batch(16, 4, 1) == (16, [])
    assert grpo_batch(16, 4, 2) == (8, [])
    per, notes = grpo_batch(12, 4, 8)  # 12 rollouts on 8 ranks: 2 each = 16, divisible by 4
    assert per == 2 and (per * 8) % 4 == 0 and notes
    per, notes = grpo_batch(2, 4, 1)  # fewer rollouts than one group
    assert per == 4 and notes


def test_missing_max_completion_tokens_uses_seq_len() -> None:
    plan = build_plan(deep_update(rl_config(), "orchestrator.train.sampling.max_completion_tokens", None))
    args, notes = grpo_args(plan, world_size=1, cuda=False, bf16_ok=False, prompt_tokens=20)
    assert args["max_completion_length"] == 108 and notes


def test_group_size_one_is_rejected() -> None:
    with pytest.raises(PlanError, match="group_size"):
        build_plan(deep_update(rl_config(), "orchestrator.group_size", 1))


def test_sft_mapping_and_loss_mask() -> None:
    cfg = deep_update(sft_config(), "data.micro_batch_size", 16)
    args, notes = sft_args(build_plan(cfg), world_size=2, cuda=False, bf16_ok=False)
    assert args["per_device_train_batch_size"] == 16 and args["gradient_accumulation_steps"] == 2
    assert args["max_length"] == 64 and args["completion_only_loss"] is True and not notes
    cfg = deep_update(sft_config(), "data.loss_mask.user", True)
    args, _ = sft_args(build_plan(cfg), world_size=1, cuda=False, bf16_ok=False)
    assert args["completion_only_loss"] is False
    cfg = deep_update(sft_config(), "data.shuffle", False)
    args, _ = sft_args(build_plan(cfg), world_size=1, cuda=False, bf16_ok=False)
    assert args["train_sampling_strategy"] == "sequential"
    assert sft_batch(128, 1, 1) == (1, 128, [])
    assert sft_batch(10, 4, 1)[2]  # uneven -> a note


@pytest.mark.parametrize(
    ("sched", "expected"),
    [
        ({"type": "constant"}, {"lr_scheduler_type": "constant", "warmup_steps": 0}),
        ({"type": "linear", "warmup_steps": 3, "decay_steps": 0}, {"lr_scheduler_type": "constant_with_warmup"}),
        (
            {"type": "linear", "warmup_steps": 2, "decay_steps": 10, "min_lr": 1e-4},
            {
                "lr_scheduler_type": "warmup_stable_decay",
                "warmup_steps": 2,
                "lr_scheduler_kwargs": {"num_decay_steps": 10, "decay_type": "linear", "min_lr_ratio": 0.2},
            },
        ),
        (
            {"type": "cosine", "warmup_steps": 2, "min_lr": 1e-5},
            {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr": 1e-5}},
        ),
    ],
)
def test_scheduler_mapping(sched: dict, expected: dict) -> None:
    cfg = deep_update(sft_config(max_steps=20), "scheduler", sched)
    cfg = deep_update(cfg, "optim.lr", 5e-4)
    args, _ = sft_args(build_plan(cfg), world_size=1, cuda=False, bf16_ok=False)
    for key, value in expected.items():
        if isinstance(value, dict):
            for k, v in value.items():
                assert args[key][k] == pytest.approx(v) if isinstance(v, float) else args[key][k] == v
        else:
            assert args[key] == value


def test_scheduler_errors() -> None:
    cfg = deep_update(sft_config(max_steps=10), "scheduler", {"type": "linear", "warmup_steps": 5, "decay_steps": 10})
    with pytest.raises(PlanError, match="exceeds max_steps"):
        build_plan(cfg)
    with pytest.raises(PlanError, match="not a valid SFT config"):
        build_plan(deep_update(sft_config(), "scheduler", {"type": "polynomial"}))


def test_optimizer_mapping() -> None:
    sgd = deep_update(sft_config(), "optim", {"type": "sgd", "lr": 0.1, "momentum": 0.8, "nesterov": True})
    args, _ = sft_args(build_plan(sgd), world_size=1, cuda=False, bf16_ok=False)
    assert args["optim"] == "sgd" and args["optim_args"] == "momentum=0.8,nesterov=true"
    for kind in ("muon", "sign_sgd"):
        plan = build_plan(deep_update(sft_config(), "optim", {"type": kind}))
        args, _ = sft_args(plan, world_size=1, cuda=False, bf16_ok=False)
        assert "optim" not in args and plan.optim.type == kind  # built by the engine
    with pytest.raises(PlanError, match="not a valid SFT config"):
        build_plan(deep_update(sft_config(), "optim", {"type": "lamb"}))


def test_lora_ckpt_and_primenb_fields() -> None:
    lora = {"rank": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": ["q_proj", "experts"], "modules_to_save": []}
    plan = build_plan(deep_update(rl_config(), "trainer.model.lora", lora))
    assert plan.lora == {
        "r": 8,
        "lora_alpha": 16.0,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "experts"],
        "modules_to_save": [],
    }
    plan = build_plan(rl_config(ckpt={"interval": 5, "keep_last": 2}))
    assert (plan.ckpt_interval, plan.keep_last) == (5, 2)
    plan = build_plan(deep_update(rl_config(), "trainer.ckpt", {"interval": None, "keep_last": None}))
    assert (plan.ckpt_interval, plan.keep_last) == (None, None)
    plan = build_plan(rl_config(primenb=None))
    assert (plan.seed, plan.sample_every, plan.logging_steps, plan.init_from) == (0, 10, 1, None)


def test_launch_command() -> None:
    assert launch_command("/r", 1) == [sys.executable, "-m", "primenb.engine", "/r"]
    cmd = launch_command("/r", 2)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    assert cmd[-3:] == ["-m", "primenb.engine", "/r"]
    acc = launch_command("/r", 2, launcher="accelerate")
    assert "--multi_gpu" in acc and "--cpu" not in acc and acc[acc.index("--num_processes") + 1] == "2"
    with pytest.raises(ValueError):
        launch_command("/r", 0)
