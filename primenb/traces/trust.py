"""Trust follows the trace: the one road from a trace's recorded environments to code.

A trace names environments in two places: its config (``[...env.taskset] id``, what `apply` and
`rerun` launch) and its record (``data.*.sources[].env_id`` + ``args``, what serve, eval, load and
generate read). Either can name any importable callable (``subprocess:getoutput`` with a ``cmd``
argument), so a trace this installation's engine did not make is someone else's code until the
person trusts it. Trust is provenance, never a field of the trace: a run directory is trusted only
while the record the engine left under ``PRIME_HOME`` when it started the run matches it
(`primenb.protocol.provenance`); an imported bundle, a folder copied in and reindexed, an unpacked
export and a run synced back from a host (its engine ran there) are untrusted on every verb, and
``--trust`` is the only way up. Every
environment built or importable name resolved for a trace goes through `environment`, whatever
asks; `check` is the same gate for ids a verb is about to launch. An untrusted trace can still be
served and evaluated: `prompt_format` takes its recorded prompt format as plain data.

`tests/adversarial/test_trust_road.py` enumerates every caller of the environment registry in
``primenb/`` and holds that each one goes through here (or is named there with its reason).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from primenb.errors import PrimenbError

MAX_TEMPLATE = 10_000  # characters of a recorded prompt format (what the server takes)


class UntrustedTrace(PrimenbError):
    """An imported trace names environment code that is not built in or registered here."""


def imported(trace: Any) -> bool:
    """True for a trace that came from another machine (`harness import` marks it)."""
    return trace is not None and bool(trace.get("imported"))


def made_here(trace: Any) -> bool:
    """True when this installation's engine started ``trace``'s run in the folder it is read
    from (its provenance record matches); a trace marked imported never is."""
    from primenb.protocol.provenance import made_here as recorded

    if trace is None:
        return False
    if imported(trace):
        return False
    return recorded(getattr(trace, "run_dir", None), trace.get("trace_id"))


def untrusted(trace: Any) -> bool:
    """True for a trace read from a folder this installation's engine did not make; None (the
    person typed the ids and arguments) is never untrusted."""
    return trace is not None and not made_here(trace)


def _origin(trace: Any) -> str:
    if imported(trace):
        return "was imported from another machine"
    return (
        "was not made by this installation's engine (a folder copied in or reindexed, an unpacked "
        "bundle, or a run whose engine ran on another host)"
    )


def foreign(env_ids: Iterable[str]) -> list[str]:
    """The ids that would import code not built in, registered here or an installed taskset."""
    from primenb.envs.registry import known_ids

    known = set(known_ids())
    return [e for e in dict.fromkeys(env_ids) if e not in known]


def check(trace: Any, env_ids: Iterable[str], verb: str, *, trust: bool = False) -> None:
    """Raise `UntrustedTrace` when ``trace`` was not made here, is not trusted, and one of
    ``env_ids`` would import code that is not built in or registered here."""
    if trust or not untrusted(trace):
        return
    bad = foreign(str(e) for e in env_ids)
    if bad:
        module = bad[0].partition(":")[0]
        raise UntrustedTrace(
            f"trace {trace.id} {_origin(trace)} and names environment {bad[0][:200]!r}, "
            f"which is not built in or registered here: {verb} would import and run module {module[:200]!r}. "
            f"Read the trace's configs/config.toml; if you trust it, {verb} again with --trust (or trust=True), "
            "or register the environment with %prime_env add"
        )


def sources(trace: Any, kinds: Iterable[str] = ("train",)) -> list[dict[str, Any]]:
    """The recorded environment sources of ``trace`` (``data.<kind>.sources``) that have the shape
    primenb writes: a string ``env_id`` and an object ``args``; anything else is not a source."""
    data = trace.data if isinstance(trace.data, dict) else {}
    out = []
    for kind in kinds:
        part = data.get(kind)
        for src in (part.get("sources") if isinstance(part, dict) else None) or []:
            if isinstance(src, dict) and isinstance(src.get("env_id"), str) and src["env_id"]:
                args = src.get("args")
                out.append({**src, "args": dict(args) if isinstance(args, dict) else {}})
    return out


def environment(
    env_id: str, args: dict[str, Any] | None = None, *, trace: Any = None, verb: str, trust: bool = False
) -> Any:
    """Build environment ``env_id`` with ``args``. ``trace`` is the trace the id or the arguments
    were read from (None when the person typed both): a trace not made here and not trusted raises
    `UntrustedTrace` before anything is imported. The only caller of the registry's builders
    outside ``primenb.envs`` and the engine process."""
    from primenb.envs.registry import get_environment

    check(trace, [env_id], verb, trust=trust)
    return get_environment(env_id, **dict(args or {}))


def recorded_args(trace: Any, env_id: str, verb: str, *, trust: bool = False) -> dict[str, Any]:
    """The arguments ``trace`` recorded for ``env_id`` (eval first: its held-out rows), checked:
    arguments from an untrusted trace go only to an environment built in or registered here."""
    for src in sources(trace, ("eval", "train")):
        if src["env_id"] == env_id:
            check(trace, [env_id], verb, trust=trust)
            return dict(src["args"])
    return {}


def prompt_format(trace: Any, verb: str, *, trust: bool = False) -> str | None:
    """How the trace's model was shown a text prompt (its first environment's ``text_template``):
    built from the environment when it may be, else the format the trace recorded, as plain
    data; None when neither is known (the model is served raw)."""
    for src in sources(trace):
        try:
            env = environment(src["env_id"], src["args"], trace=trace, verb=verb, trust=trust)
        except UntrustedTrace:
            return recorded_prompt_format(trace)
        except Exception:  # served raw: the prompt format is a convenience, not a requirement
            return None
        template = getattr(env, "text_template", None)
        return template if isinstance(template, str) else None
    return None


def recorded_prompt_format(trace: Any) -> str | None:
    """The prompt format the trace recorded for its first environment, as plain data: nothing is
    imported or built. What a route reached by a request's path uses (the server's run-time loading:
    a folder anyone could write must not run code in the server)."""
    for src in sources(trace):
        kept = src.get("text_template")
        return kept if isinstance(kept, str) and "{prompt}" in kept and len(kept) <= MAX_TEMPLATE else None
    return None


__all__ = [
    "UntrustedTrace",
    "check",
    "environment",
    "foreign",
    "imported",
    "made_here",
    "prompt_format",
    "recorded_args",
    "recorded_prompt_format",
    "sources",
    "untrusted",
]
