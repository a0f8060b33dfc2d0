"""Every ```python block in README.md and docs/*.md runs as written, so a documented call cannot
silently disappear again.

Each block runs as the one cell of a fresh notebook: a real IPython ``InteractiveShell`` in its
own process with the extension loaded (as README's first line does), in a temporary folder,
against a temporary PRIME_HOME holding three synthetic finished traces whose ids start
``3fa9``, ``7c01`` and ``e2d4`` (the ids the docs use) with a few metric rows. A block that cannot
run here says why in the document itself, on the line before it::

    <!-- not-run: launches a training run (minutes) -->

and is listed by `test_not_run_blocks_are_listed` (adding one means editing NOT_RUN below).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^(?:<!-- not-run: (?P<why>[^>]+?) -->\n)?```python\n(?P<code>.*?)^```$", re.M | re.S)

# (document, first line of the block) -> the reason the document gives; reviewed here on purpose
NOT_RUN = {
    ("README.md", "%load_ext primenb"): "trains a model",
    ("docs/serve.md", "srv = %prime_serve quickstart"): "needs a trained run",
    (
        "docs/environments.md",
        "from primenb.envs import vf_episodes",
    ): "needs a served model and a verifiers environment",
    ("docs/harness.md", "%prime_harness apply 3fa9 --steps 200 --set trainer.optim.lr=1e-5"): "starts training runs",
}


def blocks(doc: Path) -> list[tuple[int, str, str | None]]:
    """(line number, code, not-run reason) of every python block of a document."""
    text = doc.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start("code")) + 1, m.group("code"), m.group("why")) for m in BLOCK.finditer(text)]


def runnable_blocks() -> list[Any]:
    return [
        pytest.param(doc, line, code, id=f"{doc.relative_to(ROOT)}:{line}")
        for doc in DOCS
        for line, code, why in blocks(doc)
        if why is None
    ]


def prepare_home(home: Path, runs: Path) -> None:
    """Three finished traces with the docs' ids, indexed, each with metric rows and a config."""
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import write_trace
    from tests.harness.synth import make_doc

    for n, prefix in enumerate(("3fa9", "7c01", "e2d4")):
        doc = make_doc(n + 1, prefix=prefix)
        doc["trace_id"] = f"{prefix}c0d1e2"
        doc["parent"] = None
        doc["name"] = f"docs-run-{prefix}"
        run_dir = runs / doc["name"]
        run_dir.mkdir(parents=True)
        write_trace(run_dir, doc)
        (run_dir / "status.json").write_text(json.dumps({"state": "completed", "step": 3, "max_steps": 3}))
        rows = [{"step": s, "phase": "rl", "reward": s / 10 + n / 100, "loss": 1 / s} for s in range(1, 4)]
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert index_trace(doc, run_dir)


# one block in a fresh kernel-like process: what a reader who pastes it into a new notebook gets
# (in one shared shell, a module imported by an earlier block hides a missing attribute)
RUNNER = """
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "primenb")
result = shell.run_cell(sys.stdin.read(), store_history=False)
failure = result.error_before_exec or result.error_in_exec
print("BLOCK-FAILED: " + repr(failure) if failure is not None else "BLOCK-OK")
"""


@pytest.fixture
def notebook_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A working folder and the environment of a fresh notebook over a prepared PRIME_HOME."""
    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    prepare_home(tmp_path / "home", work / "runs")
    env = {**os.environ, "PRIME_HOME": str(tmp_path / "home"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return work, env


@pytest.mark.parametrize(("doc", "line", "code"), runnable_blocks())
def test_doc_snippet_runs(doc: Path, line: int, code: str, notebook_dir: tuple[Path, dict[str, str]]) -> None:
    work, env = notebook_dir
    done = subprocess.run(
        [sys.executable, "-c", RUNNER], input=code, cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert "BLOCK-OK" in done.stdout, f"{doc.name}:{line}: the block fails as written\n{done.stdout}\n{done.stderr}"


def test_not_run_blocks_are_listed() -> None:
    """Blocks a document marks not-run, with their reasons: exactly the reviewed list above."""
    found = {}
    for doc in DOCS:
        for _, code, why in blocks(doc):
            if why is not None:
                assert why.strip(), f"{doc.name}: a not-run marker without a reason"
                found[(str(doc.relative_to(ROOT)), code.splitlines()[0].split("  #")[0].strip())] = why
    assert set(found) == set(NOT_RUN), found
    for key, why in found.items():
        assert NOT_RUN[key] in why, (key, why)
    print("\n".join(f"not run: {d} ({first}): {why}" for (d, first), why in sorted(found.items())))


def test_blocks_found() -> None:
    """The extraction finds the blocks (a changed fence style would make every test above vacuous)."""
    assert sum(len(blocks(d)) for d in DOCS) >= 7
    assert os.path.basename(DOCS[0]) == "README.md"
