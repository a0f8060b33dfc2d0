"""Real engine runs on the tiny default (subprocess ``python -m primenb.engine RUN_DIR``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from primenb.engine import launch_command
from tests.engine.conftest import (
    deep_update,
    metrics,
    rl_config,
    run_engine,
    samples,
    sft_config,
    start_engine,
    status,
    write_run,
)
from tests.polling import wait_for
from tests.ports import free_port

# raised by peft/TRL internals when a PeftModel is loaded in-process; nothing to act on
pytestmark = [
    pytest.mark.slow,  # trains real (tiny) models in subprocesses
    pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning"),
]


def _losses(run_dir: Path) -> list[float]:
    return [r["loss"] for r in metrics(run_dir) if "loss" in r]


def test_sft_run_learns_and_writes_the_run_directory(sft_run: Path) -> None:
    st = status(sft_run)
    assert st["state"] == "completed" and st["step"] == 80 and st["max_steps"] == 80
    assert st["world_size"] == 1 and st["ranks_seen"] == 1 and st["mode"] == "sft"
    assert st["ended_at"] and st["error"] is None and isinstance(st["pid"], int)

    losses = _losses(sft_run)
    assert len(losses) >= 10
    assert losses[-1] < 0.5 * losses[0]  # loss falls (5.6 -> ~0.6 in 80 steps)
    rows = metrics(sft_run)
    assert all(isinstance(r["step"], int) and isinstance(r["time"], float) for r in rows)
    assert any("tokens/s" in r and r["tokens/s"] > 0 for r in rows)
    assert {r["phase"] for r in rows} == {"sft"}  # every row names its phase
    numbers = [v for r in rows for v in r.values() if isinstance(v, float)]
    assert all(v == v and abs(v) != float("inf") for v in numbers)
    evals = [r for r in rows if "eval/reverse-text/reward" in r]
    assert [r["step"] for r in evals] == [0, 40, 80]
    assert all(0.0 <= r["eval/reverse-text/exact_match"] <= 1.0 for r in evals)

    steps = sorted({s["step"] for s in samples(sft_run)})
    # at the start and the end always; every 20 steps in between as the time budget allows
    assert steps[0] == 0 and steps[-1] == 80 and set(steps) <= {0, 20, 40, 60, 80}
    assert all({"prompt", "completion", "reward", "answer"} <= s.keys() for s in samples(sft_run))

    ckpts = sorted(p.name for p in (sft_run / "checkpoints").iterdir())
    assert ckpts == ["step_40", "step_80"]
    final = sft_run / "checkpoints" / "step_80"
    for name in ("model.safetensors", "config.json", "tokenizer.json", "primenb_checkpoint.json"):
        assert (final / name).exists(), name
    assert st["final_checkpoint"] == str(final)
    log = (sft_run / "logs" / "engine.log").read_text()
    assert "SFTTrainer arguments" in log
    assert "malloc: blocks up to 512 MB stay in the heap, trimmed over 1024 MB free" in log
    args = json.loads((sft_run / "configs" / "trainer_args.json").read_text())
    assert args["trainer"] == "SFTTrainer" and args["args"]["max_length"] == 64


def test_checkpoint_reloads_offline(sft_run: Path) -> None:
    import torch

    from primenb.engine.models import load_model

    model, tok, base = load_model("primenb/tiny-byte", init_from=str(sft_run))  # run dir -> latest
    assert base["path"].endswith("step_80") and len(tok) == 260
    enc = tok(["abcde="], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=40, do_sample=False, pad_token_id=0)
    assert tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True).startswith("<reversed_text>")


def test_grpo_run_writes_rewards_and_samples(sft_run: Path, tmp_path: Path) -> None:
    cfg = rl_config(
        primenb={
            "seed": 0,
            "sample_every": 2,
            "logging_steps": 1,
            "init_from": str(sft_run / "checkpoints" / "step_80"),
        }
    )
    cfg = deep_update(
        cfg,
        "orchestrator.eval",
        {
            "interval": 3,
            "num_examples": 16,
            "source": cfg["orchestrator"]["train"]["source"],
        },
    )
    run_dir = write_run(tmp_path / "rl", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    st = status(run_dir)
    assert st["state"] == "completed" and st["step"] == 6 and st["mode"] == "rl"

    train_rows = [r for r in metrics(run_dir) if "reward" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4, 5, 6]
    for r in train_rows:
        assert 0.0 <= r["reward"] <= 1.0 and "rewards/lcs/mean" in r and "reward_std" in r
        assert "loss" in r and "completions/mean_length" in r and r["completions/mean_length"] <= 48
    assert [r["step"] for r in metrics(run_dir) if "eval/reverse-text/reward" in r] == [0, 3, 6]

    rows = samples(run_dir)
    assert sorted({s["step"] for s in rows}) == [1, 2, 4, 6]
    assert all(s["prompt"].endswith("=") and s["answer"] == s["prompt"][:-1][::-1] for s in rows)
    assert all(0.0 <= s["reward"] <= 1.0 and "lcs" in s["rewards"] for s in rows)
    assert any(s["completion"].startswith("<reversed_text>") for s in rows)  # warm start shows
    assert (run_dir / "checkpoints" / "step_6" / "model.safetensors").exists()


def test_lora_run_saves_adapter_only_and_reloads(sft_run: Path, tmp_path: Path) -> None:
    lora = {
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.0,
        "modules_to_save": [],
        "target_modules": ["q_proj", "v_proj", "experts", "fc1_latent_proj"],
    }
    cfg = deep_update(rl_config(max_steps=3), "trainer.model.lora", lora)
    cfg["primenb"]["init_from"] = str(sft_run)
    run_dir = write_run(tmp_path / "lora", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert status(run_dir)["state"] == "completed"
    final = run_dir / "checkpoints" / "step_3"
    names = {p.name for p in final.iterdir()}
    assert "adapter_config.json" in names and "adapter_model.safetensors" in names
    assert "model.safetensors" not in names
    adapter_cfg = json.loads((final / "adapter_config.json").read_text())
    assert sorted(adapter_cfg["target_modules"]) == ["q_proj", "v_proj"]  # unknown names dropped
    meta = json.loads((final / "primenb_checkpoint.json").read_text())
    assert meta["adapter"] and meta["base"]["path"].endswith("step_80")

    from primenb.engine.models import load_model

    model, _, base = load_model("primenb/tiny-byte", init_from=str(final))
    assert hasattr(model, "peft_config") and base["path"].endswith("step_80")
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)


def test_bad_optimizer_fails_with_reason(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "bad", deep_update(sft_config(), "optim.type", "lamb"))
    proc = run_engine(run_dir)
    assert proc.returncode == 1
    st = status(run_dir)
    assert st["state"] == "failed" and st["ended_at"]
    assert "optim.type = 'lamb' is not supported; use one of 'adamw', 'sgd', 'muon', 'sign_sgd'" in st["error"]
    assert st["log_tail"] and any("lamb" in line for line in st["log_tail"])
    assert "Traceback" not in proc.stderr  # a user error is a message, not a traceback


def test_crash_mid_training_keeps_checkpoints(tmp_path: Path) -> None:
    cfg = rl_config(max_steps=10, ckpt={"interval": 2, "keep_last": None})
    cfg["orchestrator"]["train"]["source"] = [
        {
            "name": "crashy",
            "env": {
                "taskset": {
                    "id": "tests.engine.crashy_env:load",
                    "fail_on_call": 4,
                    "num_train": 200,
                    "num_eval": 10,
                }
            },
        }
    ]
    run_dir = write_run(tmp_path / "crash", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 1
    st = status(run_dir)
    assert st["state"] == "failed" and st["error_type"] == "RuntimeError"
    assert "reward server went away (call 4)" in st["error"]
    assert any("Traceback" in line or "reward server" in line for line in st["log_tail"])
    assert st["step"] == 3  # three steps finished before the fourth reward call raised
    assert (run_dir / "checkpoints" / "step_2" / "model.safetensors").exists()
    assert not (run_dir / "checkpoints" / "step_3").exists()  # no final checkpoint on failure
    assert [r["step"] for r in metrics(run_dir) if "reward" in r] == [1, 2, 3]


def _crashy(tmp_path: Path, name: str, max_steps: int, **env: Any) -> Path:
    cfg = rl_config(max_steps=max_steps)
    taskset = {"id": "tests.engine.crashy_env:load", "stop_run": False, "num_train": 200, "num_eval": 10, **env}
    cfg["orchestrator"]["train"]["source"] = [{"name": "crashy", "env": {"taskset": taskset}}]
    return write_run(tmp_path / name, cfg)


def test_reward_function_failing_on_most_completions_fails_the_run(tmp_path: Path) -> None:
    run_dir = _crashy(tmp_path, "allfail", 4, fail_on_call=1)
    proc = run_engine(run_dir)
    assert proc.returncode == 1
    st = status(run_dir)
    assert st["state"] == "failed" and st["error_type"] == "RewardFunctionError"
    assert "reward function 'lcs' failed on 16 of 16 completions" in st["error"]
    assert "RuntimeError: reward server went away" in st["error"] and "reward_error_limit = 0.5" in st["error"]
    (row,) = [r for r in metrics(run_dir) if "reward_errors" in r]
    assert (row["step"], row["reward_calls"], row["reward_errors"], row["reward_errors/lcs"]) == (1, 16, 16, 16)


def test_reward_failures_below_the_limit_are_counted_per_step(tmp_path: Path) -> None:
    run_dir = _crashy(tmp_path, "somefail", 2, fail_every=4)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert status(run_dir)["state"] == "completed"
    rows = [r for r in metrics(run_dir) if "reward" in r]
    assert [r["step"] for r in rows] == [1, 2]
    assert [(r["reward_calls"], r["reward_errors"], r["reward_errors/lcs"]) for r in rows] == [(16, 4, 4)] * 2


def test_unloadable_model_fails_with_reason(tmp_path: Path) -> None:
    cfg = sft_config(model={"name": "nobody-here/not-a-real-model-xyz", "lora": None})
    run_dir = write_run(tmp_path / "nomodel", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 1
    st = status(run_dir)
    assert st["state"] == "failed" and st["error_type"] == "ModelLoadError"
    assert "Could not load model 'nobody-here/not-a-real-model-xyz'" in st["error"]
    assert "primenb/tiny-byte" in st["error"]


def test_unreachable_hub_dataset_fails_fast(tmp_path: Path) -> None:
    import time

    from tests.engine.conftest import engine_env

    env = engine_env()
    for var in (
        "HF_HUB_OFFLINE",
        "HF_DATASETS_OFFLINE",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        env.pop(var, None)
    env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"  # nothing listens there: "offline"
    cfg = deep_update(sft_config(), "data.name", "someone/some-sft-dataset")
    run_dir = write_run(tmp_path / "nodata", cfg)
    t0 = time.time()
    proc = run_engine(run_dir, env=env)
    assert proc.returncode == 1
    assert time.time() - t0 < 300  # a hang limit (a hub client retrying for many minutes), not a speed check
    st = status(run_dir)
    assert st["state"] == "failed" and st["error_type"] == "DatasetLoadError"
    assert "Could not load dataset 'someone/some-sft-dataset'" in st["error"]
    assert "not reachable" in (run_dir / "logs" / "engine.log").read_text()


def _long_sft(tmp_path: Path, name: str) -> Path:
    cfg = sft_config(max_steps=100_000, ckpt={"interval": 3, "keep_last": 2}, eval=None)
    cfg["primenb"]["logging_steps"] = 1
    cfg["data"]["name"] = "reverse-text"
    return write_run(tmp_path / name, cfg)


def _assert_stopped(run_dir: Path) -> None:
    st = status(run_dir)
    assert st["state"] == "stopped" and st["stop_requested"]
    assert 0 < st["step"] < 100_000
    final = run_dir / "checkpoints" / f"step_{st['step']}"
    assert (final / "model.safetensors").exists() and st["final_checkpoint"] == str(final)
    kept = sorted(int(p.name[5:]) for p in (run_dir / "checkpoints").iterdir())
    assert len(kept) <= 2 and kept[-1] == st["step"]  # keep_last=2 applies to the final too


def test_stop_file_stops_at_a_step_boundary(tmp_path: Path) -> None:
    run_dir = _long_sft(tmp_path, "stopfile")
    proc = start_engine(run_dir)
    try:
        wait_for(
            lambda: len(_losses(run_dir) if (run_dir / "metrics.jsonl").exists() else []) >= 4, 120, "4 logged steps"
        )
        (run_dir / "STOP").touch()
        assert proc.wait(timeout=600) == 0  # only catches a hang: the step, checkpoint and trace on a busy machine
    finally:
        proc.kill()
    _assert_stopped(run_dir)
    assert status(run_dir)["stop_requested"] == "STOP file"


def test_sigterm_stops_at_a_step_boundary(tmp_path: Path) -> None:
    run_dir = _long_sft(tmp_path, "sigterm")
    proc = start_engine(run_dir)
    try:
        wait_for(lambda: (run_dir / "metrics.jsonl").exists() and len(_losses(run_dir)) >= 2, 120, "2 logged steps")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=600) == 0  # only catches a hang: the step, checkpoint and trace on a busy machine
    finally:
        proc.kill()
    _assert_stopped(run_dir)
    assert "SIGTERM" in status(run_dir)["stop_requested"]


def test_muon_and_cosine_schedule_run(tmp_path: Path) -> None:
    cfg = sft_config(max_steps=6, eval=None, ckpt=None)
    cfg["optim"] = {
        "type": "muon",
        "lr": 2e-3,
        "weight_decay": 0.0,
        "max_norm": 1.0,
        "betas1": 0.9,
        "betas2": 0.95,
        "mu": 0.95,
    }
    cfg["scheduler"] = {"type": "cosine", "warmup_steps": 2, "min_lr": 2e-4}
    cfg["primenb"]["logging_steps"] = 1
    run_dir = write_run(tmp_path / "muon", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lrs = [r["learning_rate"] for r in metrics(run_dir) if "learning_rate" in r]
    assert lrs[0] == 0.0 and max(lrs) == pytest.approx(2e-3)
    assert lrs[-1] < max(lrs) and lrs[-1] >= 2e-4 - 1e-12  # decays toward min_lr
    assert "optimizer: muon (MuonFactory)" in (run_dir / "logs" / "engine.log").read_text()
    assert (run_dir / "checkpoints" / "step_6").exists()  # a final checkpoint even with ckpt=null


def test_two_ranks_with_torchrun(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "ddp", rl_config(max_steps=2))
    cmd = launch_command(run_dir, 2)
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    proc = run_engine(run_dir, argv=cmd, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    st = status(run_dir)
    assert st["state"] == "completed" and st["world_size"] == 2 and st["ranks_seen"] == 2
    assert st["ranks_in_sync"] is True  # DDP kept both ranks' weights equal
    args = json.loads((run_dir / "configs" / "trainer_args.json").read_text())["args"]
    assert args["per_device_train_batch_size"] == 8  # 16 rollouts per step over 2 ranks
    assert [r["step"] for r in metrics(run_dir) if "reward" in r] == [1, 2]
    assert "[rank 1]" in proc.stderr  # the second rank really ran (its log goes to stderr only)


def test_two_ranks_with_accelerate_launch(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path / "acc", sft_config(max_steps=2, eval=None, ckpt=None))
    proc = run_engine(run_dir, argv=launch_command(run_dir, 2, launcher="accelerate"), timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    st = status(run_dir)
    assert st["state"] == "completed" and st["ranks_seen"] == 2 and st["ranks_in_sync"] is True


def test_engine_usage_errors(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "primenb.engine"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "primenb.engine", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 2 and "resolved.json" in proc.stderr


def test_rl_with_sft_warmup_then_lora(tmp_path: Path) -> None:
    lora = {"rank": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": [], "modules_to_save": []}
    cfg = deep_update(rl_config(max_steps=2), "trainer.model.lora", lora)
    cfg["primenb"].update(sft_warmup_steps=40, logging_steps=10)
    src = cfg["orchestrator"]["train"]["source"]
    cfg["orchestrator"]["eval"] = {"interval": 2, "num_examples": 16, "source": src}
    run_dir = write_run(tmp_path / "warm", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    st = status(run_dir)
    assert st["state"] == "completed" and st["step"] == 2 and st["warmup_step"] == 40

    rows = metrics(run_dir)
    warm = [r for r in rows if "warmup/loss" in r]
    assert [r["step"] for r in warm] == [1, 10, 20, 30, 40]
    assert warm[-1]["warmup/loss"] < 0.7 * warm[0]["warmup/loss"]
    assert rows[0]["step"] == 0 and "warmup/eval/reverse-text/reward" in rows[0]  # before warm-up
    assert [r["step"] for r in rows if "reward" in r] == [1, 2]
    # every row says its phase (viewers split warm-up and GRPO steps by it); the status ends "done"
    is_warm = [any(k.startswith("warmup/") for k in r) for r in rows]
    assert {r["phase"] for r, w in zip(rows, is_warm, strict=True) if w} == {"sft warmup"}
    assert {r["phase"] for r, w in zip(rows, is_warm, strict=True) if not w} == {"rl"}
    assert st["phase"] == "done"
    first_eval = next(r for r in rows if "eval/reverse-text/reward" in r)
    assert first_eval["step"] == 0  # GRPO's step 0 = after the warm-up

    warm_dir = run_dir / "checkpoints" / "sft_warmup"
    assert (warm_dir / "model.safetensors").exists() and (warm_dir / "tokenizer.json").exists()
    final = run_dir / "checkpoints" / "step_2"
    assert (final / "adapter_model.safetensors").exists()
    meta = json.loads((final / "primenb_checkpoint.json").read_text())
    assert meta["base"]["path"] == str(warm_dir)
    assert (
        json.loads((run_dir / "configs" / "trainer_args.sft_warmup.json").read_text())["args"]["learning_rate"] == 2e-3
    )

    from primenb.engine.models import load_model  # the adapter reloads onto the warmed-up base

    model, tok, base = load_model("primenb/tiny-byte", init_from=str(run_dir))
    assert hasattr(model, "peft_config") and base["path"] == str(warm_dir) and len(tok) == 260


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A local model folder whose tokenizer has a chat template (the hub-model code path)."""
    from primenb.engine.models import build_byte_tokenizer, build_tiny_model

    folder = tmp_path_factory.mktemp("chatmodel")
    tok = build_byte_tokenizer()
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(folder)
    build_tiny_model("xs", 0).save_pretrained(folder)
    return folder


def test_chat_template_model_from_a_local_folder(chat_model_dir: Path, tmp_path: Path) -> None:
    cfg = rl_config(max_steps=2, model={"name": str(chat_model_dir)})
    cfg["primenb"].update(sft_warmup_steps=3, sample_every=1)
    run_dir = write_run(tmp_path / "chat-rl", cfg)
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert status(run_dir)["state"] == "completed"
    rows = samples(run_dir)
    assert rows and rows[0]["prompt"].startswith("system: Reverse the text")  # chat messages
    assert all(isinstance(s["completion"], str) for s in rows)

    sft = sft_config(max_steps=3, model={"name": str(chat_model_dir), "lora": None}, ckpt=None)
    run_dir = write_run(tmp_path / "chat-sft-short", sft)  # the chat prompt alone is ~105 tokens
    assert run_engine(run_dir).returncode == 1
    assert "data.seq_len = 64 tokens leaves no room" in status(run_dir)["error"]

    run_dir = write_run(tmp_path / "chat-sft", deep_update(sft, "data.seq_len", 256))
    proc = run_engine(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["step"] for r in metrics(run_dir) if "eval/reverse-text/reward" in r] == [0, 3]
    saved = json.loads((run_dir / "checkpoints" / "step_3" / "tokenizer_config.json").read_text())
    assert "chat_template" in saved or (run_dir / "checkpoints" / "step_3" / "chat_template.jinja").exists()
