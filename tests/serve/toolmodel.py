"""A checkpoint that calls tools: the embedded model fully fine-tuned in the test session (about a
minute on 2 cores; a LoRA adapter of the random-init model did not learn the call's bytes in that
time) on the embedded chat template's conversations. Asked about the weather (with a weather tool), its
greedy reply is a ``get_weather`` call; given the tool's answer, it answers in words. Nothing is
learnt here that the next issue's training would need: this only proves the serving side."""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from pathlib import Path
from typing import Any

ANSWER = "It is sunny in Paris."
CALL_ARGS = {"city": "Paris"}
STEPS = 300
LR = 1e-3
# The fitted checkpoint, kept in the repository (2 MB; the fit costs minutes of the suite's CPU,
# 13 min under the two workers' load): used while its recipe hash matches, refitted otherwise.
# `python -m tests.serve.toolmodel` refits and stores it.
STORED = Path(__file__).resolve().parent.parent / "data" / "toolmodel"

SYSTEMS = [None, "You are a helpful assistant.", "Answer briefly.", "You are a coding agent with tools."]
QUESTIONS = [
    "What is the weather in Paris?",
    "Weather in Paris today?",
    "How is the weather in Paris right now?",
    "Tell me the weather in Paris.",
    "Is it raining in Paris?",
]


def weather_tool(description: str = "Weather in a city") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": description,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }


def _other_tool(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(["read_file", "bash", "search", "get_time"])
    return {
        "type": "function",
        "function": {"name": name, "description": f"{name} tool", "parameters": {"type": "object", "properties": {}}},
    }


def _conversations(rng: random.Random) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    out = []
    for _ in range(48):
        tools = [weather_tool(rng.choice(["Weather in a city", "Weather lookup", "Current weather"]))]
        if rng.random() < 0.3:
            tools.append(_other_tool(rng))
        rng.shuffle(tools)
        system = rng.choice(SYSTEMS)
        head = [{"role": "system", "content": system}] if system else []
        question = {"role": "user", "content": rng.choice(QUESTIONS)}
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(CALL_ARGS)},
                }
            ],
        }
        result = {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": rng.choice(["sunny, 21 C", '{"sky": "sunny"}', "Sunny."]),
        }
        out.append(([*head, question, call], tools))
        out.append(([*head, question, call, result, {"role": "assistant", "content": ANSWER}], tools))
    return out


def fit(run_dir: Path, *, seed: int = 0) -> Path:
    """Fit the model and write it as ``run_dir/checkpoints/step_N`` (with the tokenizer and the
    engine's note, as a trained run has it). Returns the checkpoint folder."""
    import torch

    from primenb.engine.models import build_byte_tokenizer, build_tiny_model
    from primenb.protocol.checkpoint import CheckpointDir

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = build_byte_tokenizer()
    model = build_tiny_model("xs", seed=0)
    rows = []
    for messages, tools in _conversations(rng):
        enc = tok.apply_chat_template(
            messages, tools=tools, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, mask = enc["input_ids"], enc["assistant_masks"]
        last = max(i for i, m in enumerate(mask) if m)
        first = last
        while first > 0 and mask[first - 1]:
            first -= 1
        labels = [t if first <= i <= last else -100 for i, t in enumerate(ids)]  # the last reply only
        rows.append((ids, labels))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR)
    decay = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 - step / STEPS)
    model.train()
    for _step in range(STEPS):
        batch = rng.sample(rows, 8)
        width = max(len(ids) for ids, _ in batch)
        ids = torch.tensor([i + [0] * (width - len(i)) for i, _ in batch])
        labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in batch])
        attn = (torch.arange(width)[None] < torch.tensor([len(i) for i, _ in batch])[:, None]).long()
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        decay.step()
    ckpt = run_dir / "checkpoints" / f"step_{STEPS}"
    ckpt.mkdir(parents=True)
    model.save_pretrained(str(ckpt))
    tok.save_pretrained(str(ckpt))
    CheckpointDir(ckpt).write_meta(
        {
            "step": STEPS,
            "mode": "sft",
            "model": "primenb/tiny-byte",
            "adapter": False,
            "base": {"name": "primenb/tiny-byte", "seed": 0, "path": None},
            "loss": float(loss.detach()),
        }
    )
    (run_dir / "status.json").write_text(json.dumps({"state": "completed"}))
    return ckpt


def recipe_hash() -> str:
    """What the fit depends on: this file, the byte tokenizer (vocabulary and chat template) and
    the model's configuration. A change to any of them invalidates the stored checkpoint."""
    from primenb.engine.models import build_byte_tokenizer, build_tiny_model

    tok = build_byte_tokenizer()
    parts = [
        Path(__file__).read_bytes(),
        json.dumps(tok.get_vocab(), sort_keys=True).encode(),
        str(tok.chat_template).encode(),
        json.dumps(build_tiny_model("xs", seed=0).config.to_diff_dict(), sort_keys=True, default=str).encode(),
    ]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()


def checkpoint(run_dir: Path) -> Path:
    """The tool-calling checkpoint in ``run_dir`` (as `fit` writes it): copied from the stored one
    when its recipe matches, fitted here otherwise."""
    stamp = STORED / "recipe.json"
    try:
        stored = json.loads(stamp.read_text())["recipe"] == recipe_hash()
    except (OSError, ValueError, KeyError):
        stored = False
    if not stored:
        return fit(run_dir)
    ckpt = run_dir / "checkpoints" / f"step_{STEPS}"
    shutil.copytree(STORED, ckpt, ignore=shutil.ignore_patterns("recipe.json"))
    (run_dir / "status.json").write_text(json.dumps({"state": "completed"}))
    return ckpt


def store() -> None:
    """Fit and keep the checkpoint in the repository (`STORED`)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = fit(Path(tmp))
        shutil.rmtree(STORED, ignore_errors=True)
        shutil.copytree(ckpt, STORED)
    (STORED / "recipe.json").write_text(json.dumps({"recipe": recipe_hash(), "steps": STEPS}) + "\n")


if __name__ == "__main__":
    store()
