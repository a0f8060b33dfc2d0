"""A recording view of a validated config: which settings a reader actually read. Pure Python.

`build_plan` reads the config through `ConfigView`, so the settings the local engine honours are
the ones it read (`primenb.engine.honoured`), not a list kept beside it by hand, and an error a
conversion raises can name the setting it came from (the last one read).
Paths are patterns as `primenb.config.leaves.pattern` writes them: dotted, ``[]`` for a list item.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined


class Reads:
    """The paths read so far, in order, and the last leaf read (path, value, schema default)."""

    def __init__(self) -> None:
        self.paths: dict[str, None] = {}  # an ordered set
        self.last: tuple[str, Any, Any] | None = None

    def add(self, path: str, value: Any, default: Any = PydanticUndefined) -> None:
        self.paths[path] = None
        if not isinstance(value, (BaseModel, list, dict)):  # a leaf: where a failed conversion points
            self.last = (path, value, default)

    def __contains__(self, path: object) -> bool:
        return path in self.paths

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def view(value: Any, path: str, reads: Reads) -> Any:
    """``value`` as the reader sees it: tables (and lists of tables) as recording views."""
    if isinstance(value, BaseModel):
        return ConfigView(value, path, reads)
    if isinstance(value, list) and any(isinstance(v, BaseModel) for v in value):
        return [view(v, f"{path}[]", reads) for v in value]
    return value


class ConfigView:
    """A validated table seen through `Reads`: reading a field records its path. Unknown names
    raise AttributeError (so ``getattr(view, "x", default)`` works as on the model)."""

    __slots__ = ("_model", "_path", "_reads")

    def __init__(self, model: BaseModel, path: str, reads: Reads) -> None:
        self._model = model
        self._path = path
        self._reads = reads

    def __getattr__(self, name: str) -> Any:
        model, path, reads = self._model, self._path, self._reads
        if name == "model_extra":  # an open table's own keys (taskset arguments)
            return ExtraView(model.model_extra or {}, path, reads)
        if name == "model_dump":  # the whole table is read
            return self._dump
        field = type(model).model_fields.get(name)
        if field is None:
            raise AttributeError(name)
        value = getattr(model, name)
        reads.add(_join(path, name), value, field.default)
        return view(value, _join(path, name), reads)

    def _dump(self, **kwargs: Any) -> dict[str, Any]:
        out = self._model.model_dump(**kwargs)
        self._reads.add(self._path, self._model)
        _record_all(out, self._path, self._reads)
        return out

    def __repr__(self) -> str:
        return f"ConfigView({self._path or '<root>'}: {self._model!r})"


def _record_all(table: dict[str, Any], path: str, reads: Reads) -> None:
    for key, value in table.items():
        reads.add(_join(path, key), value)
        if isinstance(value, dict):
            _record_all(value, _join(path, key), reads)


class ExtraView(Mapping[str, Any]):
    """An open table's extra keys; reading one records ``table.key``."""

    def __init__(self, extra: dict[str, Any], path: str, reads: Reads) -> None:
        self._extra, self._path, self._reads = extra, path, reads

    def __getitem__(self, key: str) -> Any:
        value = self._extra[key]
        self._reads.add(_join(self._path, key), value)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._extra)

    def __len__(self) -> int:
        return len(self._extra)


def peek(table: Any, name: str) -> Any:
    """Read ``name`` of a table without recording it: a setting the plan looks at only to say
    that the local engine does not use it (so it stays in the run's "not used locally" list)."""
    model = table._model if isinstance(table, ConfigView) else table
    return getattr(model, name)


__all__ = ["ConfigView", "ExtraView", "Reads", "peek", "view"]
