"""A test environment (loaded by the engine as 'tests.engine.crashy_env:load') whose reward
function raises on a chosen call, to check what a crash mid-training leaves behind. The function
is marked ``stop_run_on_error``: unmarked reward functions that raise score 0.0 and training goes on."""

from __future__ import annotations

from typing import Any

from primenb.envs import Environment, get_environment


def load(fail_on_call: int = 4, **kwargs: Any) -> Environment:
    base = get_environment("reverse-text", **kwargs)
    (inner,) = base.reward_funcs
    calls = {"n": 0}

    def lcs(prompts: list[Any], completions: list[Any], **kw: Any) -> list[float]:
        calls["n"] += 1
        if calls["n"] >= fail_on_call:
            raise RuntimeError(f"reward server went away (call {calls['n']})")
        return inner(prompts=prompts, completions=completions, **kw)

    lcs.stop_run_on_error = True  # type: ignore[attr-defined]  # raise, don't score 0.0 (primenb.envs.guard)
    base.reward_funcs = [lcs]
    return base
