"""A served model's stage (a trace's own model, or the SFT warm-up its adapter was trained on) is
spelled once (`primenb.protocol.stage`): the admin route, the worker's spec and the pool read it."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, get_args

import pytest

import primenb
from primenb.protocol.stage import FINAL, SFT_WARMUP, STAGES
from primenb.serve.protocol import AddModel
from primenb.serve.worker import load_into

ROOT = Path(primenb.__file__).parent
READERS = ["engine/serving.py", *(f"serve/{n}.py" for n in ("adapters", "app", "client", "protocol", "worker"))]


class RecordingPool:
    def __init__(self) -> None:
        self.loaded: list[dict[str, Any]] = []

    def add_checkpoint(self, served_id: str, checkpoint: str, **kwargs: Any) -> None:
        self.loaded.append({"id": served_id, **kwargs})


def test_the_admin_route_takes_exactly_the_stages() -> None:
    field = AddModel.model_fields["stage"]
    assert get_args(field.annotation) == STAGES == (FINAL, SFT_WARMUP)
    assert field.default == FINAL


def test_the_worker_loads_a_spec_with_its_stage_or_final() -> None:
    pool = RecordingPool()
    load_into(pool, {"id": "a", "checkpoint": "/c", "stage": SFT_WARMUP})
    load_into(pool, {"id": "b", "checkpoint": "/c"})
    assert [m["stage"] for m in pool.loaded] == [SFT_WARMUP, FINAL]


def test_the_worker_refuses_a_spec_whose_stage_is_not_one() -> None:
    pool = RecordingPool()
    with pytest.raises(ValueError, match="'warmup' is not one of final, sft_warmup"):
        load_into(pool, {"id": "a", "checkpoint": "/c", "stage": "warmup"})
    assert pool.loaded == []  # not served under a stage no client looks for


@pytest.mark.parametrize("name", READERS)
def test_the_serving_modules_do_not_spell_a_stage_again(name: str) -> None:
    tree = ast.parse((ROOT / name).read_text())
    spelled = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in STAGES]
    assert spelled == [], f"{name} spells a stage at lines {spelled}; use primenb.protocol.stage"
