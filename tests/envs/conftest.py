"""Helpers for environment tests: a private PRIME_HOME, local environment folders, a verifiers
taskset package written to a temporary folder (importable, also by the engine subprocess)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

# A local environment in the documented interface: two reward functions, a parser, an eval split.
GOOD_ENV = '''
"""Echo a digit back (a test environment)."""

__version__ = "0.3.1"

import random


def first_char(prompts, completions, answer, **kwargs):
    """1.0 when the reply starts with the answer."""
    return [1.0 if str(c).startswith(a) else 0.0 for c, a in zip(completions, answer)]


def short(prompts, completions, **kwargs):
    """1 / (1 + length of the reply): shorter is better."""
    return [1.0 / (1 + len(str(c))) for c in completions]


class Env:
    def __init__(self, rows, eval_rows):
        self.dataset = rows
        self.eval_dataset = eval_rows
        self.reward_funcs = [first_char, short]
        self.reward_weights = [1.0, 0.5]
        self.system_prompt = "Repeat the digit."
        self.parser = lambda text: text.strip()[:1]


def load_environment(num_examples: int = 50, seed: int = 0):
    rng = random.Random(seed)
    rows = [{"prompt": d, "answer": d} for d in (str(rng.randint(0, 9)) for _ in range(num_examples))]
    return Env(rows, [{"prompt": str(d), "answer": str(d)} for d in range(10)])
'''

# A reward function that raises on completions without a digit (most of a random model's).
RAISING_ENV = '''
def strict(prompts, completions, answer, **kwargs):
    """1.0 when the first digit of the reply is the answer; raises when there is no digit."""
    out = []
    for c, a in zip(completions, answer):
        digits = [ch for ch in str(c) if ch.isdigit()]
        if not digits:
            raise ValueError("no digit in the reply")
        out.append(1.0 if digits[0] == a else 0.0)
    return out


def anything(prompts, completions, **kwargs):
    return [0.5 for _ in completions]


def load_environment(num_examples: int = 40):
    rows = [{"prompt": str(i % 10), "answer": str(i % 10)} for i in range(num_examples)]
    return {"dataset": rows, "reward_funcs": [strict, anything]}
'''

TASKSET_INIT = """
from echo_words.taskset import EchoWordsTaskset

__all__ = ["EchoWordsTaskset"]
"""

# A verifiers v1 taskset: typed task data, two weighted @vf.reward methods (one async, one
# reading the trace), a config knob.
TASKSET = '''
"""Echo a word (a test taskset)."""

import verifiers.v1 as vf


class EchoData(vf.TaskData):
    answer: str


class EchoConfig(vf.TasksetConfig):
    num_tasks: int = 20
    seed: int = 0


class EchoTask(vf.Task[EchoData, vf.State, vf.TaskConfig]):
    @vf.reward(weight=1.0)
    async def exact(self, task: EchoData, trace: vf.Trace) -> float:
        """1.0 when the reply is the word."""
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def starts(self, task: EchoData, trace: vf.Trace) -> float:
        """1.0 when the reply starts with the word's first letter; raises on an empty reply."""
        if not trace.last_reply:
            raise ValueError("empty reply")
        return float(trace.last_reply[0] == task.answer[0])


class EchoWordsTaskset(vf.Taskset[EchoTask, EchoConfig]):
    """Say a word back."""

    def load(self):
        words = ["ab", "ba", "cab", "abc", "bca"]
        for i in range(self.config.num_tasks):
            w = words[(i + self.config.seed) % len(words)]
            yield EchoTask(EchoData(prompt=w, system_prompt="Echo the word.", answer=w), self.config.task)
'''

TOOLS_TASKSET = '''
import verifiers.v1 as vf


class Calc(vf.Toolset):
    @vf.tool
    async def add(self, a: int, b: int) -> int:
        """Add two numbers."""
        return a + b


class CalcData(vf.TaskData):
    answer: str


class CalcTask(vf.Task[CalcData, vf.State, vf.TaskConfig]):
    @classmethod
    def toolsets(cls, config):
        return [Calc(vf.ToolsetConfig())]

    @vf.reward
    async def right(self, task, trace) -> float:
        return float(trace.last_reply == task.answer)


class CalcTaskset(vf.Taskset[CalcTask, vf.TasksetConfig]):
    def load(self):
        yield CalcTask(CalcData(prompt="2+2", answer="4"), self.config.task)


__all__ = ["CalcTaskset"]
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private PRIME_HOME (the registry lives in it)."""
    path = tmp_path / "prime-home"
    monkeypatch.setenv("PRIME_HOME", str(path))
    return path


def registry_state(home: Path) -> dict[str, str]:
    folder = home / "environments"
    return {p.name: p.read_text() for p in sorted(folder.iterdir())} if folder.is_dir() else {}


@pytest.fixture
def tasksets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the `echo_words` (installed: it has dist-info) and `calc_tools` taskset
    packages, on sys.path here and on PYTHONPATH for engine subprocesses."""
    root = tmp_path / "site"
    write(root / "echo_words" / "__init__.py", TASKSET_INIT)
    write(root / "echo_words" / "taskset.py", TASKSET)
    write(root / "calc_tools" / "__init__.py", TOOLS_TASKSET)
    dist = root / "echo_words-0.2.0.dist-info"
    write(
        dist / "METADATA",
        "Metadata-Version: 2.1\nName: echo-words\nVersion: 0.2.0\n"
        "Summary: Echo a word back\nRequires-Dist: verifiers>=0.4\n",
    )
    write(dist / "top_level.txt", "echo_words\n")
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    yield root
    for name in [m for m in sys.modules if m.split(".")[0] in ("echo_words", "calc_tools")]:
        del sys.modules[name]
