"""Item 5 and item 11 end to end, and the issue's "done when": a planted secret and a planted private
prompt text are found nowhere in the run directory, the harness store or the logs after a real
tiny run with ``data_collection = "deny"`` whose reward functions raise with private text."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.adversarial.conftest import rl_text

pytestmark = pytest.mark.slow  # a real deny-mode run

MARK = "PRIVATE-PROMPT-MARK-7f3a"  # every reward error message carries it, with the prompt
URL_PASS = "urlpassZX81q"
FLAG_PASS = "flagpassQ93k"
TOKEN = "hf_PlantedTokenValue0123456789abcdefXYZ"

LEAKY_ENV = f'''
from primenb.envs import get_environment
from primenb.envs.base import completion_text


def load_environment(**kwargs):
    env = get_environment("reverse-text", **kwargs)
    (inner,) = env.reward_funcs

    def picky(prompts, completions, **kw):
        scores = inner(prompts=prompts, completions=completions, **kw)
        if min(scores) < 1.0:  # a perfect reply scores; anything else raises with the prompt
            raise ValueError("{MARK} cannot score " + repr(prompts[0]) + " -> " + repr(completions[0]))
        return scores

    def numeric(prompts, completions, **kw):  # Python's own error quotes the completion
        scores = inner(prompts=prompts, completions=completions, **kw)
        return [1.0 if s >= 1.0 else float(int(completion_text(c) + "x")) for s, c in zip(scores, completions)]

    env.reward_funcs = [picky, numeric]
    env.reward_weights = [1.0, 0.0]
    return env
'''


def _grep(roots: list[Path], needles: list[str]) -> list[str]:
    found = []
    for root in roots:
        for p in root.rglob("*"):
            if p.is_file():
                data = p.read_bytes()
                found += [f"{p}: {n}" for n in needles if n.encode() in data]
    return found


def test_item05_log_filter_withholds_messages_in_deny_mode(caplog: pytest.LogCaptureFixture) -> None:
    from primenb.protocol.privacy import LogFilter, set_private

    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "failed: %s", (ValueError(f"{MARK} p"),), None)
    try:
        raise ValueError(f"{MARK} in a traceback")
    except ValueError as exc:
        with_tb = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", (), (type(exc), exc, exc.__traceback__))
    set_private(True)
    try:
        for r in (record, with_tb):
            LogFilter().filter(r)
            text = logging.Formatter().format(r)
            assert MARK not in text and "withheld" in text, text
    finally:
        set_private(False)
    plain = logging.LogRecord("x", logging.INFO, __file__, 1, "url %s", (f"https://u:{URL_PASS}@h",), None)
    LogFilter().filter(plain)
    assert URL_PASS not in plain.getMessage()


def test_item05_deny_run_leaks_no_private_text_or_secret(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    import primenb.harness as h
    from primenb.backends import submit
    from primenb.config import load_config
    from primenb.envs.manage import add

    monkeypatch.setenv("HF_ENDPOINT", f"https://user:{URL_PASS}@hub.invalid")
    monkeypatch.setenv("TORCH_EXTRA_ARGS", f"--password={FLAG_PASS} --verbose")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (home / "leaky_env.py").write_text(LEAKY_ENV)
    add(str(home / "leaky_env.py"), "leaky")
    text = (
        rl_text(max_steps=2)
        .replace('id = "reverse-text"', 'id = "leaky"')
        .replace("batch_size = 32", "batch_size = 8")
        .replace("group_size = 8", "group_size = 4")
        .replace("sft_warmup_steps = 200", "sft_warmup_steps = 0")
        # its reward functions fail on every completion on purpose: keep training to see what is logged
        .replace("[primenb]\n", "[primenb]\nreward_error_limit = 1.0\n", 1)
    )
    text += '\n[primenb.privacy]\ndata_collection = "deny"\n'
    run = submit(load_config(text), name="deny-run")
    state = run.wait(timeout=800)
    logs = (run.dir / "logs" / "engine.log").read_text()
    assert state == "completed", run.logs(80)
    assert "withheld" in logs  # the reward errors were reported, without their messages
    h.reindex()
    roots = [run.dir, Path(os.environ["PRIME_HOME"])]
    leaks = _grep(roots, [MARK, "invalid literal", URL_PASS, FLAG_PASS, TOKEN])
    assert not leaks, leaks
