"""The leaves of a config: every key whose value is not itself a table.

Two walks: `schema_leaves` lists every leaf a schema can hold (each union member's fields, list
items as ``[]``), and `set_leaves` lists the leaves of one validated config whose value differs
from the schema's default. The local engine uses them to say which settings it does not honour.
"""

from __future__ import annotations

import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

Part = str | int
Chain = tuple[tuple[str, type[BaseModel]], ...]  # (key, the table class it opens), root first


def pattern(path: tuple[Part, ...]) -> str:
    """``("orchestrator", "train", "source", 0, "name")`` -> ``orchestrator.train.source[].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += "[]"
        else:
            out += f".{part}" if out else part
    return out


def _unwrap(annotation: Any) -> tuple[list[type[BaseModel]], bool]:
    """(the model classes an annotation holds, whether they sit in a list)."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation], False
    if origin is Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin is list:
        return _unwrap(get_args(annotation)[0])[0], True
    if origin in (Union, types.UnionType):
        models: list[type[BaseModel]] = []
        listed = False
        for arg in get_args(annotation):
            found, in_list = _unwrap(arg)
            models += [m for m in found if m not in models]
            listed = listed or in_list
        return models, listed
    return [], False


@dataclass(frozen=True)
class SchemaLeaf:
    """One leaf of a schema: its pattern path, the classes of the tables above it, its field."""

    path: str
    chain: Chain
    name: str
    field: FieldInfo


def schema_leaves(root: type[BaseModel]) -> list[SchemaLeaf]:
    """Every leaf of ``root``: one per field of each union member (a class met again deeper is
    not re-entered). A field that may hold a scalar or a table (``source = "policy" | {...}``) is
    a leaf and its tables are walked too."""
    out: list[SchemaLeaf] = []

    def walk(model: type[BaseModel], path: str, chain: Chain) -> None:
        for name, field in model.model_fields.items():
            sub = f"{path}.{name}" if path else name
            models, listed = _unwrap(field.annotation)
            if not models or _holds_scalar(field.annotation):
                out.append(SchemaLeaf(sub, chain, name, field))
            for m in models:
                if any(c is m for _, c in chain):
                    continue
                walk(m, sub + ("[]" if listed else ""), chain + ((name, m),))

    walk(root, "", ())
    return out


def _holds_scalar(annotation: Any) -> bool:
    """Whether a field holding tables may also hold something else than a table or none."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _holds_scalar(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(a is not type(None) and not _unwrap(a)[0] for a in get_args(annotation))
    return False


@dataclass(frozen=True)
class SetLeaf:
    """A leaf of one config whose value is not the schema's default. ``table``: an optional table
    (default none) that is present; its own leaves follow it."""

    path: tuple[Part, ...]
    value: Any
    table: bool = False


def _default(field: FieldInfo) -> Any:
    if field.default is PydanticUndefined and field.default_factory is None:
        return PydanticUndefined  # required: any value is "set"
    return field.get_default(call_default_factory=True)


def set_leaves(model: BaseModel) -> Iterator[SetLeaf]:
    """The leaves of ``model`` that differ from the defaults (a table of another union member than
    the default compares against its own class's defaults, and its tag counts as set)."""
    yield from _walk(model, None, ())


def _walk(model: BaseModel, default: BaseModel | None, prefix: tuple[Part, ...]) -> Iterator[SetLeaf]:
    cls = type(model)
    same_class = default is not None and type(default) is cls
    for name, field in cls.model_fields.items():
        value = getattr(model, name)
        base = getattr(default, name) if same_class else _default(field)
        path = prefix + (name,)
        if isinstance(value, BaseModel):
            if not isinstance(base, BaseModel):  # none, required, or a scalar by default
                yield SetLeaf(path, value, table=True)
                yield from _walk(value, None, path)
            else:
                yield from _walk(value, base, path)
                if type(base) is not type(value):
                    tag = _tag(value)
                    if tag is not None:
                        yield SetLeaf(path + (tag[0],), tag[1])
        elif isinstance(value, list) and value and all(isinstance(v, BaseModel) for v in value):
            for i, item in enumerate(value):
                yield SetLeaf(path + (i,), item, table=True)
                yield from _walk(item, None, path + (i,))
        elif value != base:
            yield SetLeaf(path, value)
    for key, value in (model.model_extra or {}).items():
        yield SetLeaf(prefix + (key,), value)


def _tag(model: BaseModel) -> tuple[str, Any] | None:
    """The key that names a union member (`type`, or `name` for renderers), if it has one."""
    for key in ("type", "name"):
        if key in type(model).model_fields:
            return key, getattr(model, key)
    return None


__all__ = ["Chain", "SchemaLeaf", "SetLeaf", "pattern", "schema_leaves", "set_leaves"]
