"""The embedded tiny byte-level models and tokenizer, optimizers, and model loading errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from primenb.engine.models import (
    build_byte_tokenizer,
    build_tiny_model,
    load_model,
    load_tokenizer,
    param_hash,
    tiny_config,
)
from primenb.engine.models_info import TINY_SIZES, ModelLoadError
from tests.ports import free_port

TEXTS = ["hello=", "<reversed_text>olleh</reversed_text>", "héllo wörld ✓ 日本\n\t", ""]


def test_tokenizer_round_trip_and_specials() -> None:
    tok = build_byte_tokenizer()
    assert len(tok) == 260
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert tok("ab")["input_ids"] == [4 + ord("a"), 4 + ord("b")]  # no specials added
    for text in TEXTS:
        ids = tok(text)["input_ids"]
        assert len(ids) == len(text.encode("utf-8"))
        assert tok.decode(ids) == text
    assert tok.decode([4 + ord("x"), 1, 0], skip_special_tokens=True) == "x"


def test_tokenizer_save_and_reload_offline(tmp_path: Path) -> None:
    tok = build_byte_tokenizer()
    tok.save_pretrained(tmp_path)
    build_tiny_model("xs").save_pretrained(tmp_path)  # a model config next to it must not matter
    again = load_tokenizer(str(tmp_path))
    assert len(again) == 260 and again.eos_token_id == 1 and again.pad_token_id == 0
    for text in TEXTS:
        assert again(text)["input_ids"] == tok(text)["input_ids"]
        assert again.decode(again(text)["input_ids"]) == text
    assert again.backend_tokenizer.normalizer is None


def test_model_is_deterministic_from_seed() -> None:
    a, b, c = build_tiny_model("xs", 0), build_tiny_model("xs", 0), build_tiny_model("xs", 1)
    assert param_hash(a) == param_hash(b)
    assert param_hash(a) != param_hash(c)
    assert a.config.tie_word_embeddings
    assert a.get_input_embeddings().weight.data_ptr() == a.get_output_embeddings().weight.data_ptr()


def test_building_does_not_disturb_global_rng() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    build_tiny_model("xs", 7)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("size", ["xs", "s", "m"])
def test_model_sizes(size: str) -> None:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(tiny_config(size))
    assert sum(p.numel() for p in model.parameters()) == TINY_SIZES[size]["params"]


def test_model_ids_and_generation() -> None:
    model, tok, base = load_model("primenb/tiny-byte", seed=0)
    assert base == {"name": "primenb/tiny-byte", "seed": 0, "path": None}
    assert param_hash(model) == param_hash(build_tiny_model("primenb/tiny-byte-xs", 0))
    enc = tok(["abc="], return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out.shape[1] <= 4 + 5


def test_unloadable_model_gives_a_short_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError) as err:
        load_model("nobody-here/not-a-real-model-xyz")
    msg = str(err.value)
    assert "Could not load model 'nobody-here/not-a-real-model-xyz'" in msg
    assert "primenb/tiny-byte" in msg and len(msg) < 1000


def test_init_from_missing_path(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_model("primenb/tiny-byte", init_from=str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="not a checkpoint"):
        load_model("primenb/tiny-byte", init_from=str(tmp_path / "empty"))


@pytest.mark.parametrize("kind", ["sign_sgd", "muon"])
def test_custom_optimizers_step_and_follow_the_scheduler(kind: str) -> None:
    from primenb.engine.optim import custom_optimizer
    from primenb.engine.plan import OptimSpec

    model = build_tiny_model("xs", 0)
    betas, mu = ((0.9, 0.95), 0.95) if kind == "muon" else (None, None)  # the schema's muon defaults
    spec = OptimSpec(kind, lr=1e-3, weight_decay=0.01, max_norm=1.0, betas=betas, momentum=None, nesterov=None, mu=mu)
    cls, kwargs = custom_optimizer(spec)
    opt = cls()(model, **kwargs) if kind == "muon" else cls(model.parameters(), **kwargs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 0.5)
    batch = torch.randint(4, 260, (4, 12))
    losses = []
    for _ in range(5):
        loss = model(input_ids=batch, labels=batch).loss
        losses.append(loss.item())
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
    assert losses[-1] < losses[0]
    assert all(g["lr"] == pytest.approx(5e-4) for g in opt.param_groups)
    if kind == "muon":
        kinds = {type(o).__name__ for o in opt.optimizers}
        assert kinds == {"Muon", "AdamW"}


def test_unreachable_hub_fails_fast_without_offline_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    for var in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    t0 = time.time()
    with pytest.raises(ModelLoadError, match="not reachable"):
        load_model("nobody-here/not-a-real-model-xyz")
    assert time.time() - t0 < 120  # a hang limit (a hub client retrying for minutes), not a speed check
