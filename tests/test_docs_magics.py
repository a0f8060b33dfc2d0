"""docs/magics.md is generated from primenb/commands.py (`make docs`): the committed file must be
the generator's output, and every option it documents must be in the real `%magic?` help of the
loaded extension, with the same help text."""

from __future__ import annotations

import html
import re
import subprocess
import sys

from primenb.commands import markdown

from .conftest import ROOT

DOC = ROOT / "docs" / "magics.md"


def _flat(text: str) -> str:
    """Without ANSI colours and with whitespace runs collapsed (argparse wraps long help)."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", text).split())


def _sections(doc: str) -> dict[str, str]:
    """`## \\`%magic\\`` heading -> its text."""
    parts = re.split(r"^## `([^`]+)`$", doc, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_committed_docs_are_the_generated_docs():
    generated = subprocess.run(
        [sys.executable, "-m", "primenb.commands", "--markdown"], capture_output=True, text=True, check=True
    ).stdout
    assert generated == markdown()
    assert DOC.read_text() == generated, "docs/magics.md is stale: run `make docs`"


def test_every_documented_option_is_in_the_magics_help(shell):
    sections = _sections(DOC.read_text())
    assert set(sections) == {
        "%%rltoml",
        "%prime_train",
        "%prime_harness",
        "%prime_env",
        "%prime_backend",
        "%prime_serve",
        "%prime_eval",
    }
    checked = 0
    for magic, body in sections.items():
        help_text = _flat(shell.object_inspect_text(magic))
        assert "Docstring" in help_text, magic  # the magic is really registered
        for label, meaning in re.findall(r"^\| `([^`]+)` \| (.*?) \|", body, flags=re.M):
            for flag in re.findall(r"--[a-z][a-z-]*", label):
                assert flag in help_text, (magic, flag)
            assert _flat(html.unescape(meaning).replace("\\|", "|")) in help_text, (magic, label, meaning)
            checked += 1
        if magic != "%%rltoml":  # its help is argparse's own usage; the others print the synopsis
            for synopsis in re.findall(r"^```\n(.+)\n```$", body, flags=re.M):
                assert _flat(synopsis) in help_text, (magic, synopsis)
    assert checked > 40
