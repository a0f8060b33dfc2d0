"""`primenb.harness`'s functions are the ones that do the work, not facades re-declaring their
parameters and defaults (issue 43: `apply`'s were written 4 times)."""

from __future__ import annotations

import importlib

import primenb.harness as h

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
