"""A test environment (loaded by the engine as 'tests.engine.crashy_env:load') whose reward
function raises: from a chosen call on (``fail_on_call``), or on every ``fail_every``-th
completion. With ``stop_run`` (the default) it is marked ``stop_run_on_error``, so its first
exception stops the run; unmarked, each failing completion scores 0.0 and is counted, and the
run fails only above ``[primenb] reward_error_limit``."""

from __future__ import annotations

from typing import Any

from primenb.envs import Environment, get_environment


def load(fail_on_call: int = 4, fail_every: int = 0, stop_run: bool = True, **kwargs: Any) -> Environment:
    base = get_environment("reverse-text", **kwargs)
    (inner,) = base.reward_funcs
    calls = {"n": 0, "one": 0}

    def lcs(prompts: list[Any], completions: list[Any], **kw: Any) -> list[float]:
        calls["n"] += 1
        if fail_every:
            if len(completions) > 1:  # make the guard score them one at a time
                raise ValueError("some completions cannot be scored")
            calls["one"] += 1
            if calls["one"] % fail_every == 0:
                raise ValueError(f"cannot score completion {calls['one']}")
        elif calls["n"] >= fail_on_call:
            raise RuntimeError(f"reward server went away (call {calls['n']})")
        return inner(prompts=prompts, completions=completions, **kw)

    if stop_run:
        lcs.stop_run_on_error = True  # type: ignore[attr-defined]  # raise, don't score 0.0 (primenb.envs.guard)
    base.reward_funcs = [lcs]
    return base
