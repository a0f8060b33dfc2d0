"""One validation shows every problem: cross-field rules run on the valid parts of a config that
has schema errors, and skip (never misjudge, never crash on) rules whose inputs are invalid."""

from __future__ import annotations

from primenb.config import check

from .test_broken import SFT, VALID


def _errors(text: str, mode: str | None = None) -> dict[str, str]:
    return {d.path: d.message for d in check(text, mode=mode).report.errors}


def test_two_schema_errors_and_a_rule_are_reported_together():
    """The issue's case: two schema errors hid `batch_size` vs `group_size` until they were fixed."""
    text = (
        VALID.replace("batch_size = 32", "batch_size = 30").replace("lr = 1e-5", 'lr = "fast"')
        + '\n[trainer.model]\nimpl = "nope"\n'
    )
    errors = _errors(text)
    assert set(errors) == {"orchestrator.batch_size", "trainer.optim.lr", "trainer.model.impl"}
    assert "must be divisible by group_size (8)" in errors["orchestrator.batch_size"]
    fixed = VALID.replace("batch_size = 32", "batch_size = 30")  # the schema errors fixed: same rule error
    assert _errors(fixed) == {"orchestrator.batch_size": errors["orchestrator.batch_size"]}


def test_a_rule_whose_input_is_invalid_is_skipped():
    text = VALID.replace("batch_size = 32", "batch_size = 30").replace("group_size = 8", 'group_size = "eight"')
    errors = _errors(text)
    assert set(errors) == {"orchestrator.group_size"}  # no verdict on 30 vs a group size that is not one
    assert "expected an integer" in errors["orchestrator.group_size"]


def test_a_misspelt_key_does_not_let_its_default_be_judged():
    """`batch_sise = 36`: the default batch size (128) is not what the user meant; 128 % 12 says nothing."""
    text = VALID.replace("batch_size = 32", "batch_sise = 36").replace("group_size = 8", "group_size = 12")
    assert set(_errors(text)) == {"orchestrator.batch_sise"}


def test_an_invalid_shared_value_makes_the_rules_reading_its_copies_skip():
    """Top-level `max_steps` fills trainer and orchestrator: invalid, it fills neither."""
    text = VALID.replace("max_steps = 20", 'max_steps = "ten"') + '\n[trainer.scheduler]\ntype = "cosine"\n'
    assert set(_errors(text)) == {"max_steps"}  # not "a cosine scheduler needs max_steps"
    other = text.replace('[trainer.scheduler]\ntype = "cosine"\n', "[trainer.scheduler]\nwarmup_steps = -1\n")
    assert "cosine" not in " ".join(_errors(other).values())


def test_rules_of_untouched_tables_still_run_next_to_a_broken_table():
    text = VALID.replace("batch_size = 32", "batch_size = 30") + "\n[ckpt]\ninterval = 0.5\nkeep_last = 0\n"
    errors = _errors(text)
    assert "orchestrator.batch_size" in errors and any(p.startswith("ckpt") for p in errors)


def test_shared_value_conflicts_are_reported_next_to_schema_errors():
    text = VALID.replace("[orchestrator]\n", "[orchestrator]\nmax_steps = 7\n").replace("lr = 1e-5", "lr = []")
    errors = _errors(text)
    assert "trainer.optim.lr" in errors
    assert "disagrees with the shared `max_steps` = 20" in errors["orchestrator.max_steps"]


def test_sft_rules_run_next_to_schema_errors():
    text = SFT + 'batch_size = 8\nmicro_batch_size = 3\n\n[optim]\nlr = "x"\nlerning_rate = 2\n'
    errors = _errors(text, mode="sft")
    assert "data.batch_size" in errors and "divisible by micro_batch_size (3)" in errors["data.batch_size"]
    assert {"optim.lr", "optim.lerning_rate"} <= set(errors)


def test_a_config_broken_everywhere_reports_its_schema_errors_without_crashing():
    text = (
        'trainer = 5\norchestrator = "x"\ndeployment = []\nmax_steps = -3\n[model]\nname = 1\n[ckpt]\ninterval = "a"\n'
    )
    report = check(text, mode="rl").report
    assert {d.path for d in report.errors} == {"trainer", "orchestrator", "deployment", "model.name", "ckpt.interval"}
    assert all(d.code != "rule" for d in report.errors)  # every rule here would read a stand-in


def test_an_unknown_environment_is_reported_next_to_schema_errors():
    text = VALID.replace('id = "reverse-text"', 'id = "revers-text"').replace("lr = 1e-5", 'lr = "x"')
    errors = _errors(text)
    assert "trainer.optim.lr" in errors
    assert "unknown environment `revers-text`" in errors["orchestrator.train.source[0].env.taskset.id"]


def _accepted_upstream_configs():
    import json
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data" / "upstream"
    for line in (data / "configs.jsonl").read_text().splitlines():
        row = json.loads(line)
        accepted = row["accepted_as"] or ""
        if "RLConfig" in accepted or "SFTConfig" in accepted:
            yield data / "configs" / row["file"], "rl" if "RLConfig" in accepted else "sft"


def test_one_schema_error_in_a_config_upstream_accepts_adds_no_rule_error():
    """Salvage never invents a problem: each of upstream's valid configs, with one unknown key
    added, reports exactly that key."""
    checked = 0
    for path, mode in _accepted_upstream_configs():
        text = "zzq_not_a_key = 1\n" + path.read_text()
        errors = check(text, mode=mode).report.errors
        assert [d.path for d in errors] == ["zzq_not_a_key"], (path, [(d.path, d.message) for d in errors])
        checked += 1
    assert checked >= 50


def test_two_errors_in_one_table_set_aside_only_that_table():
    """A missing key and a bad value in [deployment]: the table goes, the rest is still judged."""
    text = VALID.replace("batch_size = 32", "batch_size = 30") + (
        '\n[deployment]\ntype = "multi_node"\nnum_infer_nodes = "x"\n'
    )
    errors = _errors(text)
    assert {"deployment.num_train_nodes", "deployment.num_infer_nodes", "orchestrator.batch_size"} <= set(errors)


def test_a_synonym_next_to_the_real_key_leaves_the_real_key_judged():
    """`num_generations = 8` beside `group_size = 8`: the user's group_size stands, so 30 % 8 is reported."""
    text = VALID.replace("batch_size = 32", "batch_size = 30").replace(
        "group_size = 8", "group_size = 8\nnum_generations = 8"
    )
    assert set(_errors(text)) == {"orchestrator.num_generations", "orchestrator.batch_size"}


def test_sanity_warnings_of_the_valid_parts_come_with_the_errors():
    """`weight_decay = "0.1"` is a warning (prime-rl coerces it) even when another key is an error."""
    text = VALID.replace("lr = 1e-5", 'lr = 1e-5\nweight_decay = "0.1"\nlerning_rate = 2')
    report = check(text).report
    assert [d.path for d in report.errors] == ["trainer.optim.lerning_rate"]
    assert any(d.path == "trainer.optim.weight_decay" and "prime-rl accepts it" in d.message for d in report.warnings)


def test_problems_are_listed_in_the_order_of_the_text():
    """A rule error (batch_size, found after the schema pass) came before the schema error of a
    line above it: the report reads top to bottom."""
    text = VALID.replace("batch_size = 32", "batch_size = 30") + '\n[trainer.model]\nimpl = "nope"\n'
    text = text.replace("lr = 1e-5", 'lr = "fast"')
    report = check(text).report
    lines = [d.line for d in report.errors]
    assert len(lines) == 3 and None not in lines and lines == sorted(lines), [(d.line, d.path) for d in report.errors]
    shown = report.to_text()
    assert [shown.index(f":{n}:") for n in lines] == sorted(shown.index(f":{n}:") for n in lines)


def test_the_first_error_found_stays_known_when_the_list_is_in_text_order():
    """Upstream reports its first failing stage (the schema before its model validators): the
    report keeps which error its checks met first, while it lists them top to bottom."""
    text = VALID.replace("batch_size = 32", "batch_size = 30") + '\n[trainer.model]\nimpl = "nope"\n'
    report = check(text).report
    assert report.errors[0].path == "orchestrator.batch_size"  # a rule error, listed first
    first = report.first_found_error
    assert first is not None and first.path == "trainer.model.impl", [d.path for d in report.found]
