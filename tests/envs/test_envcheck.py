"""Environment ids in %%rltoml: unknown ids and arguments, located on their line."""

from __future__ import annotations

import subprocess
import sys

from primenb.config import check
from primenb.envs.manage import add
from primenb.notebook.magics import MagicFailed

from .conftest import GOOD_ENV, write

RL = """max_steps = 10
seq_len = 128

[model]
name = "primenb/tiny-byte"

[trainer]

[orchestrator]
batch_size = 8
group_size = 4

[[orchestrator.train.source]]
name = "main"

[orchestrator.train.source.env.taskset]
id = "{train_id}"
{train_args}
[orchestrator.eval]
interval = 5

[[orchestrator.eval.source]]
name = "held-out"

[orchestrator.eval.source.env.taskset]
id = "{eval_id}"
"""


def _rl(train_id="reverse-text", eval_id="reverse-text", train_args=""):
    return RL.format(train_id=train_id, eval_id=eval_id, train_args=train_args)


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_unknown_id_is_located_with_did_you_mean(shell, home):
    text = _rl(eval_id="arithmetc")
    result = shell.run_cell(f"%%rltoml cfg\n{text}")
    assert isinstance(result.error_in_exec, MagicFailed) and "1 error" in str(result.error_in_exec)
    outcome = check(text)
    (d,) = outcome.report.diagnostics
    assert d.code == "unknown-env" and d.severity == "error"
    assert d.path == "orchestrator.eval.source[0].env.taskset.id"
    assert d.line == _line_of(text, 'id = "arithmetc"')
    assert d.col == 6 and d.end_col == 6 + len('"arithmetc"')
    assert "unknown environment `arithmetc`" in d.message
    assert d.hint.startswith("did you mean `arithmetic`?") and "reverse-text" in d.hint
    assert "did you mean `arithmetic`" in outcome.report.to_text()


def test_registered_ids_are_known_and_suggested(home, tmp_path):
    write(tmp_path / "echo_digit" / "echo_digit.py", GOOD_ENV)
    add(str(tmp_path / "echo_digit"))
    assert check(_rl(train_id="echo-digit")).report.diagnostics == []
    (d,) = check(_rl(train_id="echo_digits")).report.diagnostics
    assert "did you mean `echo-digit`" in d.hint and d.severity == "error"


def test_unknown_argument_of_a_known_environment(home, tmp_path):
    text = _rl(train_args="min_length = 3\nseed = 1\n")
    (d,) = check(text).report.diagnostics
    assert d.code == "env-arg" and d.path == "orchestrator.train.source[0].env.taskset.min_length"
    assert d.line == _line_of(text, "min_length") and d.col == 1
    assert "`reverse-text` does not take the argument `min_length`" in d.message
    assert d.hint == "did you mean `min_len`?"
    write(tmp_path / "echo_digit" / "echo_digit.py", GOOD_ENV)
    add(str(tmp_path / "echo_digit"))
    (d,) = check(_rl(train_id="echo-digit", train_args="num_exemples = 3\n")).report.diagnostics
    assert d.hint == "did you mean `num_examples`?"
    assert check(_rl(train_id="echo-digit", train_args="num_examples = 3\n")).report.ok


def test_hub_ids_and_remote_only_ids(home):
    (d,) = check(_rl(train_id="primeintellect/reverse-txt")).report.diagnostics
    assert d.severity == "warning" and "did you mean `reverse-text`" in d.hint
    # no resemblance to anything known: may be installed where a remote backend trains
    assert check(_rl(train_id="i3_math", eval_id="aime25")).report.diagnostics == []


def test_sft_eval_sources_are_checked(home):
    text = """max_steps = 10

[data]
name = "reverse-text"
batch_size = 8
micro_batch_size = 8
seq_len = 64

[eval]
interval = 5

[[eval.source]]
name = "rt"

[eval.source.env.taskset]
id = "reverse-txt"
"""
    (d,) = check(text, mode="sft").report.diagnostics
    assert d.path == "eval.source[0].env.taskset.id" and d.line == _line_of(text, "reverse-txt")


def test_validation_imports_neither_torch_nor_verifiers(home, tasksets):
    code = (
        "import sys; from primenb.config import check;"
        f"text = {_rl(train_id='echo-words', eval_id='arithmetc')!r};"
        "d = check(text).report.diagnostics;"
        "assert [x.path for x in d] == ['orchestrator.eval.source[0].env.taskset.id'], d;"
        "bad = [m for m in ('torch', 'transformers', 'verifiers', 'echo_words', 'pandas') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
