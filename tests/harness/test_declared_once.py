"""`primenb.harness`'s functions are the ones that do the work, not facades re-declaring their
parameters and defaults (issue 43: `apply`'s were written 4 times)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import primenb.harness as h
from primenb.commands import HarnessApplyArgs, HarnessRerunArgs, work_values
from primenb.verbs import harness as harness_verbs

DECLARED_IN = {
    "apply": "primenb.harness.refine",
    "rerun": "primenb.harness.refine",
    "get": "primenb.traces.trace",
    "diff": "primenb.traces.comparison",
    "compare": "primenb.traces.comparison",
    "export": "primenb.traces.transfer",
    "import_": "primenb.traces.transfer",
    "rm": "primenb.traces.transfer",
    "load": "primenb.harness.inference",
    "generate": "primenb.harness.inference",
}


def test_each_harness_function_is_its_one_declaration() -> None:
    again = [n for n, m in DECLARED_IN.items() if getattr(h, n) is not getattr(importlib.import_module(m), n)]
    assert not again, f"re-declared in primenb.harness: {again}"


@pytest.mark.parametrize(("verb", "cls"), [("apply", HarnessApplyArgs), ("rerun", HarnessRerunArgs)])
def test_the_verb_hands_its_arguments_whole_to_the_harness_function(
    verb: str, cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`%prime_harness apply/rerun`: every argument but the trace (resolved by the verb) and how the
    run is followed reaches the one declaration, by name."""
    seen: dict[str, Any] = {}
    parameters = inspect.signature(getattr(h, verb)).parameters
    monkeypatch.setattr(h, "get", lambda ref: SimpleNamespace(id="p"))
    monkeypatch.setattr(h, verb, lambda ref, **kw: seen.update(kw) or SimpleNamespace(name="r", dir=Path(".")))
    args = cls(trace="t", backend="local", name="again", trust=True)
    face = SimpleNamespace(ref=lambda r: r, say=lambda text: None, follow=lambda run, **kw: run)
    getattr(harness_verbs, verb)(args, face)
    assert seen == work_values(args, "trace") and seen["name"] == "again" and seen["trust"] is True
    assert set(seen) <= set(parameters)
