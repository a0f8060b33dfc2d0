"""What a served model's weights are has one vocabulary (`primenb.protocol.weights`): base, adapter,
full. A trace's ``finetune`` (prime-rl's ``lora`` / ``full``) is read into it, not carried along."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import primenb
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.weights import ADAPTER, FULL, WEIGHTS
from primenb.serve.client import ID_INFIX, finetune_kind

ROOT = Path(primenb.__file__).parent
DECIDERS = ["engine/serving.py", "serve/adapters.py", "serve/client.py"]


class Doc(dict[str, Any]):
    """A trace's document as `finetune_kind` reads it."""


@pytest.mark.parametrize(
    ("doc", "want"),
    [({"finetune": "lora"}, ADAPTER), ({"finetune": "full"}, FULL), ({"adapter": {"rank": 8}}, ADAPTER), ({}, FULL)],
)
def test_a_trace_s_finetune_is_read_into_the_one_vocabulary(doc: dict[str, Any], want: str) -> None:
    assert finetune_kind(Doc(doc)) == want
    assert finetune_kind(Doc(doc)) in ID_INFIX  # the id the client makes for it


def test_a_checkpoint_that_is_here_says_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / CheckpointDir.ADAPTER_CONFIG).write_text("{}")
    assert finetune_kind(Doc({"finetune": "full"}), tmp_path) == ADAPTER


@pytest.mark.parametrize("name", DECIDERS)
def test_no_module_compares_a_kind_with_a_spelled_word(name: str) -> None:
    words = {*WEIGHTS, "lora", "model"}
    spelled = [
        n.lineno
        for n in ast.walk(ast.parse((ROOT / name).read_text()))
        if isinstance(n, ast.Compare)
        and any(isinstance(c, ast.Constant) and c.value in words for c in [n.left, *n.comparators])
    ]
    assert spelled == [], f"{name} compares with a spelled kind at lines {spelled}; use primenb.protocol.weights"
