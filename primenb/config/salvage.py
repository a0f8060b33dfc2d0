"""Cross-field rules on a config with schema errors: every problem in one validation.

A config with a wrong type in one table still says a lot in the others (`batch_size = 30` with
`group_size = 8` is wrong whatever `lr` is). `salvage` sets the invalid parts aside (their
defaults stand in), builds the config from what is left, and records which paths no longer hold
what the user wrote. Rules then read the config through a `Guarded` view: a rule that touches
such a path is skipped, so a rule never judges a stand-in value (and never crashes on one).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from primenb.config.positions import Path
from primenb.config.propagate import Propagated, fed_by, propagate_rl, propagate_sft
from primenb.config.schema_walk import loc_to_path
from primenb.config.synonyms import suggest
from primenb.protocol.fields import MISSING, Mode, lookup

T = TypeVar("T")
_ROUNDS = 12  # each round sets at least one part aside; real configs need one or two
# past this many schema errors the text is not a config being edited (a paste of something else,
# generated junk): its own errors are the story, and salvaging it would cost time for nothing
MAX_ERRORS = 100


class Unusable(Exception):
    """A rule read a value that is not what the user wrote (invalid, or a stand-in default)."""


@dataclass
class Salvaged:
    model: BaseModel  # an RLConfig / SFTConfig built from the valid parts
    cleaned: dict[str, Any]  # the config's data without them (what the model was built from)
    unusable: set[Path]  # paths (in the propagated config) that rules must not read
    propagated: Propagated  # where propagated values came from, and shared-value conflicts

    @property
    def view(self) -> Guarded:
        return Guarded(self.model, self.unusable)


def salvage(root: type[BaseModel], mode: Mode, data: dict[str, Any], error: ValidationError) -> Salvaged | None:
    """The config without its invalid parts, or None when too little of it is left."""
    if error.error_count() > MAX_ERRORS:
        return None
    cleaned = copy.deepcopy(data)
    unusable: set[Path] = set()
    for _ in range(_ROUNDS):
        if not _set_aside(root, mode, cleaned, error, unusable):
            return None
        try:
            root.model_validate(cleaned)
        except ValidationError as exc:
            error = exc
            continue
        prop = propagate_sft(cleaned) if mode == "sft" else propagate_rl(cleaned)
        try:
            model = root.model_validate(prop.data)
        except ValidationError:
            return None  # a propagated value a sub-config rejects: rare, and its own error says so
        for path in list(unusable):
            unusable.update(fed_by(path, mode))
        return Salvaged(model, cleaned, unusable, prop)
    return None


def _set_aside(
    root: type[BaseModel], mode: Mode, data: dict[str, Any], error: ValidationError, unusable: set[Path]
) -> bool:
    """Remove what ``error`` rejects from ``data``; False when nothing could be removed."""
    # every location is read against the data as it was: a removal must not shift the next one
    found = [(err["type"], loc_to_path(tuple(err["loc"]), data), err.get("input")) for err in error.errors()]
    removed: set[Path] = set()
    for kind, path, value in found:
        if kind == "extra_forbidden":
            # the key the user probably meant is not set (or set twice): rules must not trust it
            hint = suggest(root, mode, path[:-1], str(path[-1]), value, data)
            if hint is not None and not _present(data, hint.path):  # set by the user, it stands
                unusable.add(hint.path)
        target = path[:-1] if kind == "missing" else path
        while target and isinstance(target[-1], int):  # an element itself: the whole list goes
            target = target[:-1]
        if any(target[:n] in removed for n in range(1, len(target) + 1)):
            continue  # inside a table already set aside
        while target and not _remove(data, target):
            target = target[:-1]  # a location that maps to no key: set its table aside
        if not target:
            return False  # the top level itself is broken: nothing sensible is left
        unusable.add(target)
        removed.add(target)
    return bool(removed)


def _present(data: dict[str, Any], path: Path) -> bool:
    return lookup(data, path) is not MISSING


def _remove(data: dict[str, Any], path: Path) -> bool:
    cur: Any = data
    for part in path[:-1]:
        in_dict = isinstance(cur, dict) and part in cur
        if not (in_dict or (isinstance(cur, list) and isinstance(part, int) and part < len(cur))):
            return False
        cur = cur[part]
    if isinstance(cur, dict) and path[-1] in cur:
        del cur[path[-1]]
        return True
    return False


def run_checks(checks: Iterable[Callable[[Any], Iterator[T]]], config: Any) -> Iterator[T]:
    """Every problem the checks find; a check that reads an unusable value ends there, alone."""
    for check in checks:
        try:
            yield from check(config)
        except Unusable:
            continue


class Guarded:
    """A read-only view of a config model that raises `Unusable` on reading an unusable path."""

    __slots__ = ("_blocked", "_model", "_path")

    def __init__(self, model: BaseModel, unusable: set[Path] | _Blocked, path: Path = ()) -> None:
        self._model = model
        self._blocked = unusable if isinstance(unusable, _Blocked) else _Blocked(unusable)
        self._path = path

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)  # AttributeError passes through (getattr(x, n, default))
        return _guard(value, self._path + (name,), self._blocked)

    def __repr__(self) -> str:
        return f"Guarded({type(self._model).__name__} at {'.'.join(map(str, self._path)) or 'top level'})"


class _Blocked:
    """Unusable paths, and every table above one (for values read whole: lists, dicts)."""

    def __init__(self, unusable: set[Path]) -> None:
        self.paths = frozenset(unusable)
        self.above = frozenset(u[:n] for u in unusable for n in range(1, len(u)))


def _guard(value: Any, path: Path, blocked: _Blocked) -> Any:
    if any(path[:n] in blocked.paths for n in range(1, len(path) + 1)):
        raise Unusable(path)
    if isinstance(value, BaseModel):
        return Guarded(value, blocked, path)
    if isinstance(value, list) and any(isinstance(v, BaseModel) for v in value):
        return [_guard(v, path + (i,), blocked) for i, v in enumerate(value)]
    if path in blocked.above:
        raise Unusable(path)  # a plain value (a list, a dict) with an unusable part inside
    return value


__all__ = ["Guarded", "Salvaged", "Unusable", "run_checks", "salvage"]
