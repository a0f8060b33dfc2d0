"""`apply` (refine: continue a trace's training) and `rerun` (reproduce a trace from scratch)."""

from __future__ import annotations

import secrets
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from primenb.backends.base import Lineage

# key-path edits of the config text: one copy, in the config layer (the builder uses them too)
from primenb.config.tomledit import edited_config, parse_overrides
from primenb.config.tomlread import read_toml
from primenb.errors import PrimenbError
from primenb.protocol.checkpoint import CheckpointDir
from primenb.protocol.rundir import FINAL_STATES, RunDir
from primenb.traces.trace import Trace, get

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.run import Run


class HarnessWarning(UserWarning):
    """Something a person should know before trusting a refinement or a rerun."""


class ApplyRefused(PrimenbError):
    pass


def _config_text(trace: Trace) -> str:
    path = RunDir(trace.run_dir).config_toml
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise PrimenbError(
            f"trace {trace.id} has no config text ({path} is missing or unreadable); it was not "
            "launched through primenb's launcher, so it cannot be re-launched"
        ) from None
    if _holds_no_setting(text):  # an emptied bundle would launch an all-default run, not this trace's
        raise ApplyRefused(
            f"trace {trace.id} ({trace.name}): its {path.name} holds no settings, so it does not say what "
            "this trace trained; nothing was launched. Restore the file (a bundle's configs/config.toml) "
            "or start a new run from a config of your own with %prime_train"
        )
    return text


def _holds_no_setting(text: str) -> bool:
    import tomllib

    if not text.strip():
        return True
    try:
        return not tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return False  # a broken file gets the validator's located errors, later


def _launch(config: Config, *, name: str, backend: str | None, lineage: Lineage) -> Run:
    from primenb.backends import submit

    return submit(config, name=name, backend=backend, lineage=lineage)


def _require_final(trace: Trace, verb: str) -> None:
    if trace.status not in FINAL_STATES:
        raise ApplyRefused(
            f"cannot {verb} trace {trace.id} ({trace.name}): it is still {trace.status}; "
            f"wait for it or stop it first (%prime_train --stop {trace.name})"
        )


def _require_checkpoint(trace: Trace) -> Path:
    ckpt = trace.final_checkpoint
    if ckpt is None:
        error = f": {trace.get('error')}" if trace.get("error") else ""
        raise ApplyRefused(
            f"trace {trace.id} ({trace.name}) has no final checkpoint to continue from (status {trace.status}{error})"
        )
    if not CheckpointDir(ckpt).is_checkpoint():
        raise ApplyRefused(
            f"trace {trace.id} ({trace.name}): its final checkpoint {ckpt} is missing or "
            "incomplete (deleted, moved, or pruned by ckpt.keep_last); "
            "nothing to continue from"
        )
    return ckpt


# ---------------------------------------------------------------------------------------------
# checks


def environment_ids(config: Config) -> list[str]:
    """Every environment id ``config`` would build (each one imports and runs its code)."""
    from primenb.engine.data import is_env_name
    from primenb.engine.plan import build_plan

    plan = build_plan(config.resolved(primenb=True))
    ids = [s.env_id for s in plan.sources]
    ids += [s.env_id for s in plan.eval.sources] if plan.eval is not None else []
    name = str(plan.data.get("name") or "") if plan.mode == "sft" else ""
    ids += [name] if name and is_env_name(name) else []
    return list(dict.fromkeys(ids))


def require_trusted(trace: Trace, config: Config, verb: str, *, trust: bool) -> None:
    """An imported trace is someone else's: its config may name any importable callable as an
    environment (``subprocess:getoutput`` with a ``cmd`` argument). Until trusted (``--trust``), only
    environments that are built in, registered here or installed as verifiers tasksets run. The
    gate is `primenb.traces.trust.check`, the one every verb that reads a trace goes through."""
    from primenb.traces import trust as trust_road

    try:
        trust_road.check(trace, environment_ids(config), verb, trust=trust)
    except trust_road.UntrustedTrace as exc:
        raise ApplyRefused(str(exc)) from None


def check_architecture(parent: Trace, config: Config, ckpt: Path) -> None:
    """Refuse when the model the new run would build is not the parent's architecture."""
    from primenb.engine.fingerprint import fingerprint_for_checkpoint, fingerprint_for_name

    expected = parent.fingerprint
    if not expected:
        warnings.warn(
            f"trace {parent.id} has no architecture fingerprint (its engine ended before "
            "building the model); the architecture is not checked",
            HarnessWarning,
            stacklevel=3,
        )
        return
    try:
        got = fingerprint_for_checkpoint(ckpt)
    except Exception as exc:
        raise ApplyRefused(
            f"the checkpoint {ckpt} of trace {parent.id} cannot be read ({type(exc).__name__}: {exc})"
        ) from None
    if got["fingerprint"] != expected:
        raise ApplyRefused(
            f"architecture fingerprint mismatch: checkpoint {ckpt} holds a {got['class']} with fingerprint "
            f"{got['fingerprint']}, but trace {parent.id} trained fingerprint {expected} (the checkpoint "
            "was replaced or belongs to another run)"
        )
    name = config.model_name
    try:
        declared = fingerprint_for_name(name)
    except Exception as exc:
        warnings.warn(
            f"could not determine the architecture of model.name = {name!r} on this machine "
            f"({type(exc).__name__}); only the checkpoint was checked",
            HarnessWarning,
            stacklevel=3,
        )
        return
    if declared["fingerprint"] != expected:
        raise ApplyRefused(
            f"architecture fingerprint mismatch: model.name = {name!r} builds fingerprint "
            f"{declared['fingerprint']} ({declared['num_params']:,} parameters in {declared['num_tensors']} "
            f"tensors), but trace {parent.id} trained {parent.model.get('id')!r} with fingerprint {expected} "
            f"({parent.model.get('num_params') or 0:,} parameters). A refinement continues the same weights: "
            f"keep model.name = {parent.model.get('id')!r}"
        )


def data_differences(parent: Trace, config: Config, *, trust: bool = False) -> list[str]:
    """How the new run's training data differs from the parent's (hash per source)."""
    from primenb.engine.data import is_env_name, sft_env_args
    from primenb.engine.plan import build_plan
    from primenb.protocol.hashing import rows_hash
    from primenb.traces.trust import environment

    plan = build_plan(config.resolved(primenb=True))
    if plan.mode == "rl":
        wanted = [(s.name, s.env_id, s.env_args) for s in plan.sources]
    elif is_env_name(str(plan.data["name"])):
        wanted = [(str(plan.data["name"]), str(plan.data["name"]), sft_env_args(plan))]
    else:
        wanted = []
    before = {s.get("name"): s for s in (parent.data.get("train") or {}).get("sources", [])}
    notes = []
    for name, env_id, args in wanted:
        old = before.pop(name, None)
        env = environment(env_id, args, trace=parent, verb="apply", trust=trust)
        digest, n = rows_hash(env.train_rows())
        if old is None:
            notes.append(f"source {name!r} ({env_id}) is new: the parent did not train on it")
        elif old.get("hash") != digest:
            changed = {
                k: (old.get("args", {}).get(k), v)
                for k, v in (getattr(env, "args", None) or args).items()
                if old.get("args", {}).get(k) != v
            }
            what = ", ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in ((k, *ab) for k, ab in changed.items()))
            notes.append(
                f"source {name!r} ({env_id}): data hash {old.get('hash', '')[:12]} -> {digest[:12]}"
                f" ({n} examples){'; ' + what if what else ''}"
            )
    for name in before:
        notes.append(f"source {name!r} of the parent is not in the new run")
    return notes


# ---------------------------------------------------------------------------------------------
# apply / rerun


def apply(
    ref: Any,
    *,
    steps: int | None = None,
    overrides: Sequence[str] = (),
    backend: str | None = None,
    name: str | None = None,
    yes: bool = False,
    trust: bool = False,
) -> Run:
    """A new run continuing ``ref`` from its final checkpoint (model or adapter): its config plus
    ``overrides`` (``key=value``), ``steps`` more steps (default: as many as the parent trained),
    step numbers counting on from the parent's last. Refuses when the checkpoint is missing or
    the architecture does not match; warns (`HarnessWarning`) when the training data differs.
    A hosted trace continues on the platform, billed, so only with ``yes``. An imported trace
    whose environment is not registered here runs only with ``trust``."""
    from primenb.backends import capabilities

    parent = get(ref)
    if capabilities(parent.get("backend")).resume == "platform":  # continued where it ran
        return _apply_hosted(parent, steps=steps, overrides=overrides, name=name, yes=yes, trust=trust)
    _require_final(parent, "apply")
    ckpt = _require_checkpoint(parent)
    last = int((parent.get("final") or {}).get("step") or parent.last_step or 0)
    n = _more_steps(parent, last, steps)
    pairs = parse_overrides(overrides)
    settable = {k for k, _ in pairs}
    auto: list[tuple[str, Any]] = [("max_steps", last + n)]
    text = _config_text(parent)
    raw = read_toml(text)  # TOML 1.1, as the config was validated
    for table in ("trainer", "orchestrator"):
        if isinstance(raw.get(table), dict) and "max_steps" in raw[table]:
            auto.append((f"{table}.max_steps", last + n))
    auto += [("primenb.init_from", str(ckpt)), ("primenb.start_step", last)]
    if (raw.get("primenb") or {}).get("sft_warmup_steps"):
        auto.append(("primenb.sft_warmup_steps", 0))  # the checkpoint is past the warm-up
    config = edited_config(text, [p for p in auto if p[0] not in settable] + pairs, mode=parent.mode)
    require_trusted(parent, config, "apply", trust=trust)  # before anything builds its environment
    check_architecture(parent, config, ckpt)
    for note in data_differences(parent, config, trust=trust):
        warnings.warn(f"the training data differs from trace {parent.id}'s: {note}", HarnessWarning, stacklevel=2)
    lineage = Lineage(parent=parent.id)
    return _launch(config, name=name or f"{parent.name}-apply-{secrets.token_hex(2)}", backend=backend, lineage=lineage)


def _more_steps(parent: Trace, last: int, steps: int | None) -> int:
    """How many steps a continuation trains: ``steps``, or as many as the parent ran itself."""
    start = int((parent.get("steps") or {}).get("start") or 0)
    n = int(steps) if steps is not None else max(1, last - start)
    if n < 1:
        raise PrimenbError(f"--steps must be at least 1, got {n}")
    return n


def _apply_hosted(
    parent: Trace, *, steps: int | None, overrides: Sequence[str], name: str | None, yes: bool, trust: bool
) -> Run:
    """A trace whose backend continues on its platform (e.g. ``prime train run --resume-from`` its
    PAUSED run: the platform's checkpoint, not one here), ``steps`` more steps, as a child trace."""
    from primenb.backends import get_backend

    last = int(parent.last_step or 0)
    n = _more_steps(parent, last, steps)
    pairs = parse_overrides(overrides)
    settable = {k for k, _ in pairs}
    auto: list[tuple[str, Any]] = [("max_steps", last + n)]
    config = edited_config(_config_text(parent), [p for p in auto if p[0] not in settable] + pairs, mode=parent.mode)
    require_trusted(parent, config, "apply", trust=trust)
    backend = get_backend(str(parent.get("backend")), yes=yes, team=(parent.get("hosted") or {}).get("team"))
    return backend.continue_trace(
        parent.run_dir, config, name=name or f"{parent.name}-apply-{secrets.token_hex(2)}", parent_id=parent.id
    )


def rerun(ref: Any, *, backend: str | None = None, name: str | None = None, trust: bool = False) -> Run:
    """Re-execute ``ref`` from scratch with its recorded config (seeds and data included). When it
    ends, its trace records ``reproduces`` and whether the metrics matched step for step. An
    imported trace whose environment is not registered here runs only with ``trust``."""
    original = get(ref)
    _require_final(original, "rerun")
    config = edited_config(_config_text(original), [], mode=original.mode)
    require_trusted(original, config, "rerun", trust=trust)
    init_from = config.settings.init_from
    if init_from and not Path(init_from).exists():
        raise ApplyRefused(f"trace {original.id} started from {init_from}, which no longer exists")
    from primenb.protocol.hashing import redact

    recorded = dict(original.config)
    now = redact(config.resolved(primenb=True))
    for d in (recorded, now):
        d.pop("run", None)
    if recorded and recorded != now:
        from primenb.traces.views import flatten

        a, b = flatten(recorded), flatten(now)
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        warnings.warn(
            f"the config resolves differently now than when {original.id} ran (e.g. new defaults): "
            f"{', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}",
            HarnessWarning,
            stacklevel=2,
        )
    lineage = Lineage(parent=original.parent, reproduces=original.id, reproduces_run_dir=str(original.run_dir))
    return _launch(
        config, name=name or f"{original.name}-rerun-{secrets.token_hex(2)}", backend=backend, lineage=lineage
    )


__all__ = [
    "ApplyRefused",
    "HarnessWarning",
    "apply",
    "check_architecture",
    "data_differences",
    "edited_config",
    "environment_ids",
    "parse_overrides",
    "require_trusted",
    "rerun",
]
