"""TOML 1.1, read as upstream's install reads it (tomli >= 2.4): newlines, comments and trailing
commas in inline tables, `\\e` and `\\xHH` escapes. Diagnostics keep their lines (inside a
multi-line inline table too) and `--fix` keeps comments (issue 32)."""

from __future__ import annotations

from pathlib import Path

import tomli

from primenb.config import check, load_config, read_toml
from primenb.config.fix import fix_text
from primenb.config.templates import starter

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "upstream"
OPTIM = "[trainer.optim]\nlr = 5e-5\nmax_norm = 1.0  # gradient clipping\n"


def _inline_optim(lr: str) -> str:
    """The RL starter with [trainer.optim] written as a TOML 1.1 multi-line inline table."""
    block = f"[trainer]\noptim = {{\n  # the learning rate\n  lr = {lr},\n  max_norm = 1.0,  # clipping\n}}\n"
    text = starter().replace(OPTIM, block)
    assert block in text
    return text


def test_the_reader_is_tomli_reading_toml_1_1() -> None:
    assert tuple(int(p) for p in tomli.__version__.split(".")[:2]) >= (2, 4)
    assert read_toml('a = { x = 1,\n y = "\\e[0m\\x41", }') == {"a": {"x": 1, "y": "\x1b[0mA"}}


def test_a_multi_line_inline_table_validates_and_keeps_its_lines() -> None:
    config = load_config(_inline_optim("5e-5"))
    assert config.model.trainer.optim.lr == 5e-5
    text = _inline_optim('"fast"')
    report = check(text).report
    [err] = report.errors
    assert err.path == "trainer.optim.lr"
    assert text.splitlines()[err.line - 1].strip() == 'lr = "fast",'  # the inner line, not `optim = {`
    assert err.col == text.splitlines()[err.line - 1].index('"fast"') + 1


def test_fix_keeps_comments_and_toml_1_1_forms() -> None:
    text = _inline_optim("5e-5").replace("group_size = 8", "rollouts_per_example = 8")  # a legacy key
    fixed = fix_text(text, mode="rl")
    assert fixed.changed and fixed.outcome.report.ok, fixed.outcome.report.to_text()
    assert "group_size = 8" in fixed.after and "# the learning rate" in fixed.after
    assert "max_norm = 1.0,  # clipping\n}" in fixed.after  # the inline table as written


def test_the_upstream_toml_of_a_toml_1_1_config_round_trips() -> None:
    config = load_config(_inline_optim("5e-5"))
    upstream = config.upstream_toml()
    assert "primenb" not in read_toml(upstream) and "# the learning rate" in upstream


def test_toml_1_1_escapes_are_read_as_upstream_reads_them() -> None:
    """`\\e[0m` appended to a fake-data SFT model name (mutations-3/347): upstream accepts it. `\\x41`
    appended to an SFT model name (172): upstream's renderer rule refuses the name, at its line,
    and the message spells the character out rather than printing it."""
    assert check((DATA / "mutations-3" / "347.toml").read_text(), mode="sft").report.ok
    text = (DATA / "mutations-3" / "172.toml").read_text()
    report = check(text, mode="sft").report
    [err] = report.errors
    assert err.path == "model.name" and "\\x41" in text.splitlines()[err.line - 1]
    escaped = check(text.replace("\\x41", "\\e[0m"), mode="sft").report
    assert "\x1b" not in escaped.to_text() and "\\x1b[0m" in escaped.errors[0].message


def test_what_toml_1_1_still_refuses_is_a_located_syntax_error() -> None:
    text = _inline_optim("5e-5").replace("max_norm = 1.0,", "max_norm = 1.0,,")
    [err] = check(text).report.errors
    assert err.code == "syntax" and err.line and ",," in text.splitlines()[err.line - 1]
