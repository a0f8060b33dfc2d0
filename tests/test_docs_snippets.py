"""Every ```python block in README.md and docs/*.md runs as written, so a documented call cannot
silently disappear again.

Each document's blocks run in order as the cells of one notebook: a real IPython
``InteractiveShell`` with the extension loaded (as README's first line does), in a temporary
folder, against a temporary PRIME_HOME holding three synthetic finished traces whose ids start
``3fa9``, ``7c01`` and ``e2d4`` (the ids the docs use) with a few metric rows. A block that cannot
run here says why in the document itself, on the line before it::

    <!-- not-run: launches a training run (minutes) -->

and is listed by `test_not_run_blocks_are_listed` (adding one means editing NOT_RUN below).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^(?:<!-- not-run: (?P<why>[^>]+?) -->\n)?```python\n(?P<code>.*?)^```$", re.M | re.S)

# (document, first line of the block) -> the reason the document gives; reviewed here on purpose
NOT_RUN = {
    ("README.md", "%load_ext primenb"): "trains a model",
    ("docs/harness.md", "%prime_harness apply 3fa9 --steps 200 --set trainer.optim.lr=1e-5"): "starts training runs",
}


def blocks(doc: Path) -> list[tuple[int, str, str | None]]:
    """(line number, code, not-run reason) of every python block of a document."""
    text = doc.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start("code")) + 1, m.group("code"), m.group("why")) for m in BLOCK.finditer(text)]


def runnable_docs() -> list[Any]:
    return [
        pytest.param(doc, id=str(doc.relative_to(ROOT)))
        for doc in DOCS
        if any(why is None for _, _, why in blocks(doc))
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


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("PRIME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    prepare_home(tmp_path / "home", work / "runs")
    monkeypatch.chdir(work)
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "primenb")
    try:
        yield shell
    finally:
        shell.run_line_magic("unload_ext", "primenb")
        shell.reset(new_session=False)


@pytest.mark.parametrize("doc", runnable_docs())
def test_doc_snippets_run(doc: Path, notebook: Any) -> None:
    from IPython.utils.capture import capture_output

    ran = 0
    for line, code, why in blocks(doc):
        if why is not None:
            continue
        with capture_output() as out:
            result = notebook.run_cell(code, store_history=False)
        failure = result.error_before_exec or result.error_in_exec
        assert failure is None, f"{doc.name}:{line}: the block fails as written: {failure!r}\n{out.stdout}{out.stderr}"
        ran += 1
    assert ran


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
