"""Config: propagation into sub-configs, resolved JSON, templates, upstream TOML."""

from __future__ import annotations

import itertools
import tomllib

import pytest

from primenb import load_config
from primenb.config import ConfigError
from primenb.config.templates import starter

from ..conftest import UPSTREAM
from .test_broken import VALID


def test_resolved_propagates_shared_fields():
    cfg = load_config(VALID + '\n[ckpt]\ninterval = 5\n\n[monitors.wandb]\nproject = "p"\n\n[inference]\n')
    r = cfg.resolved()
    assert r["trainer"]["model"]["name"] == r["orchestrator"]["model"]["name"] == "primenb/tiny-byte"
    assert r["inference"]["vllm"]["model"] == "primenb/tiny-byte"
    assert r["trainer"]["max_steps"] == r["orchestrator"]["max_steps"] == 20
    assert r["trainer"]["model"]["seq_len"] == r["orchestrator"]["seq_len"] == 512
    assert r["trainer"]["ckpt"]["interval"] == r["orchestrator"]["ckpt"]["interval"] == 5
    assert r["trainer"]["monitors"]["wandb"]["project"] == r["orchestrator"]["monitors"]["wandb"]["project"] == "p"
    assert r["trainer"]["optim"] == {
        "type": "adamw",
        "lr": 1e-5,
        "weight_decay": 0.01,
        "max_norm": 1.0,
        "betas1": 0.9,
        "betas2": 0.999,
    }
    assert "primenb" not in r


def test_lora_fills_orchestrator_and_vllm():
    cfg = load_config(VALID + "\n[trainer.model.lora]\nrank = 8\nalpha = 16\n\n[inference]\n")
    r = cfg.resolved()
    assert r["orchestrator"]["model"]["lora"] == {"name": "r8-a16", "rank": 8, "alpha": 16.0}
    assert r["inference"]["vllm"]["enable_lora"] is True and r["inference"]["vllm"]["max_lora_rank"] == 8


def test_batch_size_defaults_to_128_when_neither_is_set():
    cfg = load_config(VALID.replace("batch_size = 32\n", "").replace("group_size = 8", "group_size = 16"))
    assert cfg.resolved()["orchestrator"]["batch_size"] == 128


def test_none_string_means_none():
    cfg = load_config(
        VALID.replace("[trainer.optim]", '[trainer.model]\nfused_lm_head_token_chunk_size = "None"\n\n[trainer.optim]')
    )
    assert cfg.resolved()["trainer"]["model"]["fused_lm_head_token_chunk_size"] is None


def test_primenb_table_is_stripped_for_upstream():
    cfg = load_config(VALID + "\n# ours\n[primenb]\nseed = 3\n")
    assert cfg.settings.seed == 3
    upstream = tomllib.loads(cfg.upstream_toml())
    assert "primenb" not in upstream and upstream["orchestrator"]["batch_size"] == 32
    assert cfg.resolved(primenb=True)["primenb"]["seed"] == 3


@pytest.mark.parametrize("path", UPSTREAM, ids=lambda p: p.name)
def test_upstream_examples_load(path):
    cfg = load_config(path)
    assert cfg.resolved()["max_steps"] == tomllib.loads(path.read_text()).get("max_steps")


@pytest.mark.parametrize(
    "sft,lora,model", list(itertools.product([False, True], [False, True], ["primenb/tiny-byte", "Qwen/Qwen3-0.6B"]))
)
def test_starter_configs_validate(sft, lora, model):
    cfg = load_config(starter(model, "reverse-text", sft=sft, lora=lora))
    assert cfg.mode == ("sft" if sft else "rl")
    assert (cfg.lora is not None) == lora
    assert not cfg.warnings


def test_load_config_raises_with_every_diagnostic():
    with pytest.raises(ConfigError) as info:
        load_config(VALID.replace("group_size = 8", "group_size = 7").replace("lr = 1e-5", "lr = -1.0"))
    # every problem at once: the schema error and the rule on the valid parts (32 % 7)
    assert {d.path for d in info.value.report.errors} == {"trainer.optim.lr", "orchestrator.batch_size"}
    assert "trainer.optim.lr" in str(info.value)


def test_a_config_names_each_environment_once() -> None:
    """Notebook 06's SFT run trains and evaluates on reverse-text: its summary listed
    "reverse-text, reverse-text"."""
    text = (
        'max_steps = 5\n[model]\nname = "primenb/tiny-byte"\n[data]\nname = "reverse-text"\n'
        '[eval]\ninterval = 5\n[[eval.source]]\nname = "reverse-text"\n'
        '[eval.source.env.taskset]\nid = "reverse-text"\n'
    )
    cfg = load_config(text)
    assert cfg.environments == ["reverse-text"]
    assert "environments: reverse-text\n" in repr(cfg) + "\n"
