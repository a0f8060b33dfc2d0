"""Configs prime-rl takes but the local engine cannot train (issue 25 item 6): validation names
what fails where (a located warning: upstream's verdict stays), and the local backend refuses to
launch them before a run directory exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from primenb.config import check, load_config
from primenb.errors import PrimenbError

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "upstream" / "configs" / "examples" / "basic" / "reverse-text"
BASE = (EXAMPLE / "rl.toml").read_text()

CASES = [
    ("max-steps", re.sub(r"max_steps = \d+", "max_steps = -5", BASE), "max_steps", "at least 1 step"),
    ("lr-overflow", re.sub(r"lr = [\d.e-]+", "lr = 1e300", BASE), "trainer.optim.lr", "overflows"),
    ("lr-inf-like", re.sub(r"lr = [\d.e-]+", "lr = 1e39", BASE), "trainer.optim.lr", "overflows"),
    (
        "completion-longer-than-seq-len",
        re.sub(r"seq_len = \d+", "seq_len = 64", BASE).replace(
            "max_completion_tokens = 128", "max_completion_tokens = 100000"
        ),
        "orchestrator.train.sampling.max_completion_tokens",
        "exceeds seq_len",
    ),
]


@pytest.mark.parametrize("case_id,text,path,fragment", CASES, ids=[c[0] for c in CASES])
def test_local_limit_is_a_located_warning_and_the_local_backend_refuses(case_id, text, path, fragment):
    assert text != BASE
    report = check(text, mode="rl").report
    assert report.ok, report.to_text()  # prime-rl takes it: no false error against upstream
    [d] = [d for d in report.warnings if d.code == "local-limit"]
    assert d.path == path and fragment in d.message and "local engine" in d.message and d.line
    from primenb.backends import local

    with pytest.raises(PrimenbError, match="local engine cannot train"):
        local.submit(load_config(text, mode="rl"))


def test_a_large_but_finite_lr_is_a_risk_not_a_refusal():
    text = re.sub(r"lr = [\d.e-]+", "lr = 5.0", BASE)
    [d] = [d for d in check(text, mode="rl").report.warnings if d.path == "trainer.optim.lr"]
    assert d.code == "local-risk" and "diverge" in d.message


def test_other_backends_get_the_warning_naming_the_local_engine_only():
    text = re.sub(r"max_steps = \d+", "max_steps = -5", BASE) + '\n[primenb]\nbackend = "ssh"\n'
    [d] = [d for d in check(text, mode="rl").report.warnings if d.code == "local-limit"]
    assert "only the local engine" in d.message


def test_a_stray_table_of_the_other_mode_gets_a_note_saying_what_was_decided_and_why():
    sft = (EXAMPLE / "sft.toml").read_text()
    report = check(sft + "\n[orchestrator]\nbatch_size = 8\n").report
    first = report.diagnostics[0]
    assert first.code == "mode" and "read as an RL config because it has [orchestrator]" in first.message
    assert "[data]" in first.message and "--sft" in first.hint and first.line
    assert check(sft + "\n[orchestrator]\nbatch_size = 8\n", mode="sft").report.diagnostics[0].code != "mode"
    assert not [d for d in check(sft).report.diagnostics if d.code == "mode"]  # one mode's tables: no note


def test_environment_suggestions_are_kept_per_machine_with_the_same_answer(monkeypatch):
    """A misspelt env id: the second validation reads the kept suggestion list (no metadata scan)
    and says exactly what the first did."""
    from primenb.envs import registry

    text = BASE.replace('id = "reverse-text"', 'id = "reverse-txet"')
    assert text != BASE
    first = [(d.path, d.severity, d.message, d.hint) for d in check(text, mode="rl").report.diagnostics]
    assert any("did you mean `reverse-text`" in hint for *_, hint in first), first
    monkeypatch.setattr(registry, "known_ids", lambda **_: (_ for _ in ()).throw(AssertionError("scanned again")))
    again = [(d.path, d.severity, d.message, d.hint) for d in check(text, mode="rl").report.diagnostics]
    assert again == first
