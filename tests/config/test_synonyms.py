"""Unknown keys named as other tools name them get a "did you mean" with a concrete fix."""

from __future__ import annotations

import pytest

from primenb.config import check
from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema_walk import keys_at
from primenb.config.synonyms import SYNONYMS

from .test_broken import SFT, VALID


@pytest.mark.parametrize("mode", ["rl", "sft"])
def test_every_synonym_target_is_a_real_key_of_the_schema(mode):
    root = SFTConfig if mode == "sft" else RLConfig
    for name, target in SYNONYMS.items():
        dotted = target.sft if mode == "sft" else target.rl
        if dotted is None:
            continue
        *table, key = dotted.split(".")
        assert key in keys_at(root, tuple(table), {}), f"{name} -> {dotted}: no such key in {mode}"


def _with(text: str, table: str, line: str) -> str:
    """``text`` plus ``line`` in ``[table]`` (under its header, or a new one; top level: in front)."""
    if not table:
        return f"{line} # <-\n{text}"
    header = f"[{table}]\n"
    if header in text:
        return text.replace(header, f"{header}{line} # <-\n", 1)
    return f"{text}\n{header}{line} # <-\n"


RL_CASES = [
    ("trainer.optim", "learning_rate = 3e-4", "did you mean `trainer.optim.lr`? write `lr = 3e-4` instead"),
    ("trainer.optim", "lerning_rate = 3e-4", "did you mean `trainer.optim.lr`? write `lr = 3e-4` instead"),
    ("trainer", "lr = 1e-5", "did you mean `trainer.optim.lr`? write `lr = 1e-5` under [trainer.optim]"),
    ("", "epochs = 3", "did you mean `max_steps`? write `max_steps = 3` instead (prime-rl counts optimizer steps"),
    ("trainer", "num_train_epochs = 3", "counts optimizer steps, not epochs"),
    ("trainer.optim", "warmup_steps = 10", "did you mean `trainer.scheduler.warmup_steps`?"),
    ("trainer", "weight_decay = 0.1", "write `weight_decay = 0.1` under [trainer.optim]"),
    ("trainer.optim", "max_grad_norm = 0.5", "did you mean `trainer.optim.max_norm`? write `max_norm = 0.5` instead"),
    ("trainer", "per_device_train_batch_size = 8", "write `batch_size = 8` under [orchestrator]"),
    ("orchestrator.train", "num_generations = 8", "did you mean `orchestrator.group_size`?"),
    ("orchestrator.train", "max_new_tokens = 64", "max_completion_tokens = 64` under [orchestrator.train.sampling]"),
    ("trainer.model", "lora_r = 8", "write `rank = 8` under [trainer.model.lora]"),
    ("trainer.model", "lora_alpha = 16", "write `alpha = 16` under [trainer.model.lora]"),
    ("trainer", "seed = 7", "write `seed = 7` under [primenb]"),
    ("trainer", "max_seq_length = 512", "did you mean `seq_len`? write `seq_len = 512` at the top level"),
]


@pytest.mark.parametrize("table,line,hint", RL_CASES, ids=[c[1].split(" =")[0] + "@" + c[0] for c in RL_CASES])
def test_rl_synonyms_say_where_the_setting_lives(table, line, hint):
    text = _with(VALID, table, line)
    report = check(text, mode="rl").report
    key = line.split(" =")[0]
    [d] = [d for d in report.errors if d.code == "unknown-key"]
    assert d.path == ".".join(p for p in (table, key) if p)
    assert hint in d.hint, d.hint
    marked = next(i for i, text_line in enumerate(text.splitlines(), 1) if "# <-" in text_line)
    assert d.line == marked


SFT_CASES = [
    ("optim", "learning_rate = 1e-4", "did you mean `optim.lr`? write `lr = 1e-4` instead"),
    ("data", "gradient_accumulation_steps = 4", "did you mean `data.micro_batch_size`?"),
    ("data", "max_seq_length = 256", "did you mean `data.seq_len`? write `seq_len = 256` instead"),
    ("data", "per_device_train_batch_size = 4", "did you mean `data.batch_size`?"),
    ("model", "lora_r = 4", "write `rank = 4` under [model.lora]"),
]


@pytest.mark.parametrize("table,line,hint", SFT_CASES, ids=[c[1].split(" =")[0] for c in SFT_CASES])
def test_sft_synonyms_point_at_sft_paths(table, line, hint):
    text = _with(SFT, table, line)
    report = check(text, mode="sft").report
    [d] = [d for d in report.errors if d.code == "unknown-key"]
    assert hint in d.hint, d.hint


def test_the_suggested_line_validates_where_the_hint_says():
    """Following the hint (move `lr = 1e-5` to [trainer.optim]) leaves a valid config."""
    text = VALID.replace("[trainer.optim]\nlr = 1e-5\n", "[trainer]\nlr = 3e-4\n")
    [d] = check(text).report.errors
    assert "write `lr = 3e-4` under [trainer.optim]" in d.hint
    fixed = text.replace("[trainer]\nlr = 3e-4\n", "[trainer.optim]\nlr = 3e-4\n")
    outcome = check(fixed)
    assert outcome.report.ok and outcome.model is not None
    assert outcome.model.trainer.optim.lr == 3e-4


def test_a_hint_never_repeats_a_secret_value():
    secret = "hf_SeCrEtToKeNvAlUe0123456789abcdef"
    text = _with(VALID, "orchestrator", f'model_name = "{secret}"')
    report = check(text).report
    assert any("did you mean `model.name`?" in d.hint for d in report.errors), report.to_text()
    for rendered in (report.to_text(), report._repr_html_(), report.to_json()):
        assert secret not in rendered


def test_an_unknown_key_like_nothing_lists_the_keys_of_its_table():
    report = check(_with(VALID, "trainer.optim", "zzzqqq = 1")).report
    [d] = report.errors
    assert d.hint.startswith("keys allowed here: ") and "lr" in d.hint


def test_every_synonym_points_at_a_setting_of_the_one_table() -> None:
    """Where RL and SFT keep a setting is written once (`protocol.fields.SETTINGS`): a synonym's
    target is one of its rows, never a hand-written pair of paths that can drift from it."""
    from primenb.config.synonyms import SYNONYMS
    from primenb.protocol.fields import SETTINGS

    rows = {(s.path("rl"), s.path("sft")) for s in SETTINGS.values()}
    strays = {name: (t.rl, t.sft) for name, t in SYNONYMS.items() if (t.rl, t.sft) not in rows}
    assert not strays


def test_a_trace_answers_with_its_own_token_budget_in_either_mode() -> None:
    from primenb.harness.inference import _default_tokens

    class _Trace:
        def __init__(self, config: dict) -> None:
            self.config = config

    rl = {"orchestrator": {"eval": {"sampling": {"max_completion_tokens": 24}}}}
    sft = {"data": {"name": "x"}, "eval": {"sampling": {"max_completion_tokens": 12}}}
    assert _default_tokens(_Trace(rl)) == 24  # type: ignore[arg-type]
    assert _default_tokens(_Trace(sft)) == 12  # type: ignore[arg-type]
    rl["orchestrator"]["train"] = {"sampling": {"max_completion_tokens": 40}}
    assert _default_tokens(_Trace(rl)) == 40  # type: ignore[arg-type]
    assert _default_tokens(_Trace({"max_steps": True})) == 64  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["rl", "sft"])
def test_every_path_of_the_settings_table_is_a_key_of_the_schema(mode):
    from primenb.protocol.fields import SETTINGS, path_parts

    root = SFTConfig if mode == "sft" else RLConfig
    for name, setting in SETTINGS.items():
        for dotted in setting.paths(mode):
            if dotted.startswith("primenb."):  # primenb's own table, outside upstream's schema
                continue
            *table, key = path_parts(dotted)
            assert key in keys_at(root, tuple(table), {}), f"{name} -> {dotted}: no such key in {mode}"
