"""The notebooks' quick mode (``PRIMENB_QUICK=1``) edits their configs with ``text.replace``: an
edited line must not keep a comment that still states the old value (notebook 01 read
``interval = 10  # ... every 20 steps``). Static: the notebooks are read, not run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
REPLACE = re.compile(r'\.replace\("([^"]+)", f?"([^"]+)"\)')


def sources(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_quick_edits_leave_no_stale_comment(path: Path) -> None:
    cells = sources(path)
    for old, _ in (m.groups() for source in cells for m in REPLACE.finditer(source)):
        value = old.partition(" = ")[2]
        lines = [line for source in cells for line in source.splitlines() if line.startswith(old)]
        assert lines, f"{path.name}: the quick edit {old!r} matches no config line"
        for line in lines:
            comment = line.partition("#")[2]
            assert not re.search(rf"\b{re.escape(value)}\b", comment), (
                f"{path.name}: {line!r} keeps {value} in its comment"
            )
