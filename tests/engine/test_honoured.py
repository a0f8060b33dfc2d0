"""No silent drops: every leaf of the RL and SFT schemas, set to a non-default valid value, either
changes the engine's plan (or makes it refuse the config with a clear error), is read elsewhere
by primenb, or is listed in the run's "not used locally" list."""

from __future__ import annotations

import copy
import dataclasses
import types
from collections import Counter
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from primenb.config.leaves import SchemaLeaf, _unwrap, pattern, schema_leaves
from primenb.config.propagate import fed_by, propagate_rl, propagate_sft
from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema.common import OpenSection
from primenb.engine.honoured import ELSEWHERE, is_honoured, matches, not_used_locally, plan_reads
from primenb.engine.plan import PlanError, build_plan, typed_config
from tests.engine.conftest import ENV, rl_config, sft_config


def _base(mode: str) -> dict[str, Any]:
    if mode == "sft":
        return sft_config()
    cfg = rl_config()
    cfg["orchestrator"]["eval"] = {"interval": 3, "num_examples": 8, "source": [{"env": {"taskset": dict(ENV)}}]}
    return cfg


def _strip(annotation: Any) -> list[Any]:
    """The non-model, non-None members of an annotation."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _strip(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _strip(a)]
    if annotation is type(None) or (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
        return []
    return [annotation]


def _candidates(annotation: Any) -> list[Any]:
    out: list[Any] = []
    for kind in _strip(annotation):
        origin = get_origin(kind)
        if kind is bool:
            out += [True, False]
        elif kind is int:
            out += [3, 1, 7, 5000]
        elif kind is float:
            out += [0.5, 0.125, 0.75, 3.0]
        elif kind is str:
            out += ["x-test", "0.5"]
        elif origin is Literal:
            out += list(get_args(kind))
        elif origin is list:
            out += [[c] for c in _candidates(get_args(kind)[0])[:2]]
        elif origin is dict or kind is dict:
            args = get_args(kind)
            value = args[1] if len(args) == 2 else str
            models = _unwrap(value)[0]
            values = _candidates(value) or ([_filled(models[0])] if models else [])
            key = args[0] if len(args) == 2 else str
            name = get_args(key)[0] if get_origin(key) is Literal else "x_test"  # typed keys: a known one
            out += [{name: v} for v in values[:2]] + [{}]
        elif kind is Any:
            out += ["x-test"]
    return out


def _fill_required(cls: type[BaseModel], table: dict[str, Any]) -> None:
    for name, field in cls.model_fields.items():
        if field.is_required() and name not in table:
            models, listed = _unwrap(field.annotation)
            if models and not _strip(field.annotation):
                sub: dict[str, Any] = {}
                _tag(models[0], sub)
                _fill_required(models[0], sub)
                table[name] = [sub] if listed else sub
            else:
                table[name] = _candidates(field.annotation)[0]
    if "base_url" in cls.model_fields:  # a frozen model reference needs a server to point at
        table.setdefault("base_url", "http://127.0.0.1:8000/v1")
    if getattr(cls, "on_policy", True) is False:  # the sft algorithm samples from a teacher
        table.setdefault("sampling", {"source": {"name": "teacher", "base_url": "http://127.0.0.1:8000/v1"}})


def _filled(cls: type[BaseModel]) -> dict[str, Any]:
    """A table of ``cls`` holding its tag and required keys only."""
    table: dict[str, Any] = {}
    _tag(cls, table)
    _fill_required(cls, table)
    return table


def _tag(cls: type[BaseModel], table: dict[str, Any]) -> None:
    for key in ("type", "name"):
        field = cls.model_fields.get(key)
        if field is not None and get_origin(field.annotation) is Literal and len(get_args(field.annotation)) == 1:
            table[key] = field.default
            return


def _open(cfg: dict[str, Any], leaf: SchemaLeaf, root: type[BaseModel]) -> dict[str, Any]:
    """The table holding ``leaf`` in ``cfg``, made to exist as the leaf's classes say."""
    node = cfg
    parent: type[BaseModel] = root
    for key, cls in leaf.chain:
        _, listed = _unwrap(parent.model_fields[key].annotation)
        cur = node.get(key)
        if listed:
            if not isinstance(cur, list) or not cur:
                cur = node[key] = [{}]
            holder, idx = cur, 0
            cur = cur[0]
        else:
            holder, idx = node, key
        if not isinstance(cur, dict):
            cur = {}
        want: dict[str, Any] = {}
        _tag(cls, want)
        if any(cur.get(k) != v for k, v in want.items()):
            cur = dict(want)  # another member of the union: start from its own defaults
        cur.update(want)
        _fill_required(cls, cur)
        holder[idx] = cur  # type: ignore[index]
        node, parent = cur, cls
    return node


def _outcome(cfg: dict[str, Any]) -> tuple[Any, list[str], frozenset[str]]:
    """(the plan or ("refused", why), the run's "not used locally" list, what the plan read)."""
    model = typed_config(cfg)
    try:
        plan: Any = build_plan(model)
    except PlanError as exc:
        plan = ("refused", str(exc))
    return plan, not_used_locally(model), plan_reads(model)


# keys that only count when another is unset (the config rules make the two exclusive)
_SHARED = [("max_steps",), ("model",)]  # the shared keys the base configs write
_UNSET_FOR = {"orchestrator.token_batch_size": "batch_size"}


def _unreachable(leaf: SchemaLeaf) -> bool:
    """A frozen sampling source under an on-policy algorithm: refused upstream (only the sft
    algorithm distills a frozen model's tokens), so no valid config holds these leaves there."""
    classes = [cls for _, cls in leaf.chain]
    on_policy = any(getattr(cls, "on_policy", None) is True for cls in classes)
    return on_policy and any(cls.__name__ == "FrozenModelConfig" for cls in classes)


def _base_for(mode: str, leaf: SchemaLeaf) -> dict[str, Any]:
    """The base config, with the shared keys moved where they propagate when ``leaf`` is one of
    the sub-config keys they fill (else the two would disagree)."""
    base = _base(mode)
    fed = {pattern(t) for shared in _SHARED for t in fed_by(shared, mode)}
    if leaf.path in fed:
        base = propagate_sft(base).data if mode == "sft" else propagate_rl(base).data
        for shared in _SHARED:
            base.pop(shared[0], None)
    return base


def _check(mode: str, root: type[BaseModel], leaf: SchemaLeaf) -> str:
    if _unreachable(leaf):
        return "unreachable"
    base = _base_for(mode, leaf)
    if "[]" not in leaf.path:  # a shared key: its sub-config copies would disagree with it
        for target in fed_by(tuple(leaf.path.split(".")), mode):
            node: Any = base
            for part in target[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
            if isinstance(node, dict):
                node.pop(target[-1], None)
    if leaf.path in _UNSET_FOR:
        base["orchestrator"].pop(_UNSET_FOR[leaf.path], None)
    if _strip(leaf.field.annotation) and _unwrap(leaf.field.annotation)[0]:
        defaults = {repr(leaf.field.default)}
        if all(repr(c) in defaults for c in _candidates(leaf.field.annotation)):
            return "table"  # `source = "policy"` or a table: only the table's own keys can differ
    is_tag = leaf.name in ("type", "name") and len(get_args(leaf.field.annotation)) == 1 and leaf.chain
    if is_tag:  # a union's tag: compare the default member with this one
        before = copy.deepcopy(base)
        changed = copy.deepcopy(base)
        _open(changed, leaf, root)
        tries = [changed]
    else:
        before = copy.deepcopy(base)
        table = _open(before, leaf, root)
        current = table.get(leaf.name, leaf.field.get_default(call_default_factory=True))
        tries = []
        for value in _candidates(leaf.field.annotation):
            if value == current:
                continue
            changed = copy.deepcopy(before)
            _open(changed, leaf, root)[leaf.name] = value
            tries.append(changed)
    if is_tag and typed_config(changed).model_dump() == typed_config(before).model_dump():
        return "default"  # the tag of the member used by default: nothing to change
    try:
        plan_before, _, _ = _outcome(before)
    except PlanError as exc:
        raise AssertionError(f"{leaf.path}: the base config does not validate: {exc}") from None
    for changed in tries:
        try:
            plan_after, unused, read = _outcome(changed)
        except PlanError:
            continue  # not a valid value for this key: try the next
        path = leaf.path
        if any(matches(spec, path) for spec in ELSEWHERE):
            assert not any(_prefix(u, path) for u in unused), f"{path} is read by primenb but listed as unused"
            return "elsewhere"
        if is_honoured(read, path):  # build_plan read it: it must change the plan (or refuse it)
            if isinstance(plan_before, tuple):
                return "refused"  # the table it sits in is refused locally with a clear error
            assert plan_after != plan_before, f"{path} is declared honoured but does not change the plan"
            return "refused" if isinstance(plan_after, tuple) else "plan"
        reported = [u for u in unused if _prefix(u, path)]
        assert reported, f"{path} does not change what runs and is not listed as unused: {unused}"
        # a setting the plan uses is one it read through the view (peeked ones only add a note)
        assert _sans_notes(plan_after) == _sans_notes(plan_before), f"{path} changes the plan but is not read"
        return "unused"
    raise AssertionError(f"{leaf.path}: no valid non-default value found among the candidates")


def _sans_notes(plan: Any) -> Any:
    return plan if isinstance(plan, tuple) else dataclasses.replace(plan, notes=[])


def _prefix(reported: str, path: str) -> bool:
    """Whether a reported dotted path (with indices) is ``path`` or a table above it."""
    import re

    generic = re.sub(r"\[\d+\]", "[]", reported)
    return path == generic or path.startswith(generic + ".") or path.startswith(generic + "[]")


@pytest.mark.parametrize(("mode", "root"), [("rl", RLConfig), ("sft", SFTConfig)])
def test_every_leaf_is_honoured_or_reported(mode: str, root: type[BaseModel]) -> None:
    counts: Counter[str] = Counter()
    failures = []
    for leaf in schema_leaves(root):
        try:
            counts[_check(mode, root, leaf)] += 1
        except AssertionError as exc:
            failures.append(str(exc).splitlines()[0])
    assert not failures, "\n".join(failures)
    print(mode, dict(counts))
    assert counts["plan"] >= 30 and counts["unused"] >= 100


def test_declared_paths_exist() -> None:
    """Every pattern `ELSEWHERE` declares names a leaf (or a table) of a schema: a renamed key
    cannot leave a dead declaration behind."""
    found = set()
    for root in (RLConfig, SFTConfig):
        leaves = schema_leaves(root)
        paths = {leaf.path for leaf in leaves}
        tables = {p.rsplit(".", 1)[0] for p in paths}
        # tables that take any key (taskset arguments, verifiers' env options)
        open_tables = {
            ".".join(leaf.path.split(".")[: i + 1])
            for leaf in leaves
            for i, (_, cls) in enumerate(leaf.chain)
            if issubclass(cls, OpenSection)
        }
        for spec in ELSEWHERE:
            hit = any(matches(spec, p) for p in paths | tables | {f"{t}.*" for t in open_tables})
            if hit or spec.rsplit(".", 1)[0] in open_tables:
                found.add(spec)
    assert found == set(ELSEWHERE), f"not a key of either schema: {set(ELSEWHERE) - found}"


def test_token_batch_size_trains_in_whole_groups() -> None:
    cfg = rl_config()
    del cfg["orchestrator"]["batch_size"]
    cfg["orchestrator"]["token_batch_size"] = 4096
    plan = build_plan(cfg)  # seq_len 128: 32 rollouts, 8 groups of 4
    assert plan.rl.batch_size == 32 and "token_batch_size" in plan.notes[0]
    assert "orchestrator.token_batch_size" not in not_used_locally(typed_config(cfg))


def test_pattern_of_a_set_leaf() -> None:
    assert pattern(("orchestrator", "train", "source", 0, "name")) == "orchestrator.train.source[].name"


def _nullable(annotation: Any) -> bool:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _nullable(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(a is type(None) or _nullable(a) for a in get_args(annotation))
    return annotation is type(None)


@pytest.mark.parametrize(("mode", "root"), [("rl", RLConfig), ("sft", SFTConfig)])
def test_every_nullable_leaf_set_to_none_plans_or_is_refused_clearly(mode: str, root: type[BaseModel]) -> None:
    """Every key the schema lets be None (``max_norm = "None"`` disables clipping upstream), set to
    None and to "None", either builds a plan or is refused with a `PlanError` of the plan's own:
    never a crash (``float(None)``) that `build_plan`'s safety net had to turn into a located error."""
    tried, crashes, untried = 0, [], []
    for leaf in schema_leaves(root):
        if not _nullable(leaf.field.annotation) or _unreachable(leaf):
            continue
        valid = 0
        for none in (None, "None"):  # TOML has no null: upstream reads the string "None" as None
            cfg = _base_for(mode, leaf)
            _open(cfg, leaf, root)[leaf.name] = none
            try:
                model = typed_config(cfg)
            except PlanError:  # not a valid config this way (a rule refuses it): not the plan's case
                continue
            valid += 1
            try:
                build_plan(model)
            except PlanError as exc:
                if exc.__cause__ is not None:  # the safety net caught a crash: the defect this test looks for
                    crashes.append(f"{leaf.path} = {none!r}: {exc}")
        tried += valid
        if not valid:
            untried.append(leaf.path)
    assert not crashes, "\n".join(crashes)
    assert not untried, f"no valid config sets these optional keys to none: {untried}"
    assert tried >= 100, tried


def test_max_norm_none_turns_clipping_off() -> None:
    from primenb.engine.plan import optim_args

    cfg = sft_config()
    cfg.setdefault("optim", {})["max_norm"] = None
    plan = build_plan(cfg)
    assert plan.optim.max_norm is None and optim_args(plan.optim)["max_grad_norm"] == 0.0


def test_every_elsewhere_setting_has_a_reader() -> None:
    """`ELSEWHERE` names, per setting, the module that reads it: that module exists and its
    source reads the key (``.key`` or ``"key"``), so a reader removed or renamed fails here."""
    import importlib
    import inspect
    import re

    missing = []
    for spec, reader in ELSEWHERE.items():
        key = [part for part in spec.split(".") if part != "*"][-1]
        source = inspect.getsource(importlib.import_module(reader.module))
        if not re.search(rf"\.{key}\b|[\"']{key}[\"']", source):
            missing.append(f"{spec}: {reader.module} does not read {key!r}")
    assert not missing, "\n".join(missing)


def test_the_plan_records_what_it_reads() -> None:
    """The honoured set is what `build_plan` read: settings it uses are in it, one it never looks
    at is not, an environment argument is read key by key, and a shared setting counts through
    the sub-config key it fills."""
    from primenb.engine.reads import Reads

    cfg = rl_config(ckpt={"interval": 5})
    reads = Reads()
    build_plan(cfg, reads)
    assert {"trainer.optim.lr", "orchestrator.group_size", "orchestrator.train.source[].env.taskset.num_train"} <= set(
        reads
    )
    assert "trainer.model.attn" not in reads and "deployment.num_train_gpus" not in reads
    read = plan_reads(typed_config(cfg))
    assert "ckpt.interval" in read and "ckpt.interval" not in reads  # [ckpt] fills [trainer.ckpt]
    assert "ckpt.interval" not in not_used_locally(typed_config(cfg))


def test_an_unexpected_error_in_the_plan_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anything `build_plan` raises that is not a `PlanError` comes out as one at the setting it
    was reading, with what to do (the class of ``max_norm = "None"``'s TypeError)."""
    import primenb.engine.plan as plan_module

    def broken(raw: Any) -> Any:
        return int(raw.lr)  # a conversion the schema's value does not survive

    monkeypatch.setattr(plan_module, "_optim", lambda raw: broken(raw) and None)
    cfg = sft_config()
    cfg["optim"] = {"lr": float("inf")}  # valid (ge=0), and int() of it overflows
    with pytest.raises(PlanError) as err:
        build_plan(cfg)
    assert err.value.path == "optim.lr" and isinstance(err.value.__cause__, OverflowError)
    assert str(err.value).startswith("optim.lr = inf: the local engine cannot use this value (OverflowError")
    assert "remove the key to use the schema's default (1e-06)" in str(err.value)


def test_a_refused_config_is_judged_by_everything_the_plan_reads() -> None:
    """The plan reads every setting before it refuses one, so a refused config's "not used
    locally" list holds only what the engine would not use anyway (not its sources or batch)."""
    cfg = rl_config()
    cfg["orchestrator"]["group_size"] = 1  # refused: GRPO needs groups
    model = typed_config(cfg)
    with pytest.raises(PlanError, match="group_size"):
        build_plan(model)
    read = plan_reads(model)
    assert {"orchestrator.batch_size", "orchestrator.train.source[].env.taskset.id", "trainer.optim.lr"} <= read
    assert not_used_locally(model) == not_used_locally(typed_config(rl_config()))
