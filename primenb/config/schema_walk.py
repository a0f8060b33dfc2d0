"""Questions about the schema itself: which keys a table accepts, and where a key lives."""

from __future__ import annotations

import re
import types
from functools import lru_cache
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from primenb.config.positions import Path


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every model class an annotation can hold (through Optional, unions, lists, Annotated)."""
    origin = get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if origin is Annotated:
        return _models_in(get_args(annotation)[0])
    if origin in (Union, types.UnionType, list):
        return [m for arg in get_args(annotation) for m in _models_in(arg)]
    return []


def union_tags(annotation: Any, key: str = "type") -> tuple[str, ...]:
    """The ``type`` values a typed union accepts (an optimizer's), in the order it declares them."""
    return tuple(str(m.model_fields[key].default) for m in _models_in(annotation))


def tables_at(root: type[BaseModel], path: Path, data: Any) -> list[type[BaseModel]]:
    """Model classes for the table at `path` (list indices skipped, unions by their `type`)."""
    models = [root]
    cur = data
    for part in path:
        if isinstance(part, int):
            cur = cur[part] if isinstance(cur, list) and part < len(cur) else None
            continue
        nxt: list[type[BaseModel]] = []
        for m in models:
            field = m.model_fields.get(part)
            if field is not None:
                nxt += _models_in(field.annotation)
        cur = cur.get(part) if isinstance(cur, dict) else None
        if isinstance(cur, dict) and "type" in cur:
            typed = [m for m in nxt if "type" in m.model_fields and m.model_fields["type"].default == cur["type"]]
            nxt = typed or nxt
        models = nxt
        if not models:
            return []
    return models


def keys_at(root: type[BaseModel], path: Path, data: Any) -> list[str]:
    seen: dict[str, None] = {}
    for m in tables_at(root, path, data):
        for name in m.model_fields:
            seen.setdefault(name, None)
    return list(seen)


@lru_cache(maxsize=4)
def key_index(root: type[BaseModel]) -> dict[str, list[str]]:
    """key name -> the tables (dotted paths) that accept it, for "belongs in [x]" hints."""
    index: dict[str, list[str]] = {}

    def walk(model: type[BaseModel], prefix: str, depth: int, stack: tuple[type, ...]) -> None:
        if depth > 7 or model in stack:
            return
        for name, field in model.model_fields.items():
            index.setdefault(name, []).append(prefix or "top level")
            for sub in _models_in(field.annotation):
                walk(sub, f"{prefix}.{name}" if prefix else name, depth + 1, stack + (model,))

    walk(root, "", 0, ())
    return {k: sorted(set(v), key=len) for k, v in index.items()}


_MEMBER = re.compile(r"^[a-z_-]+\[.*\]$")


def loc_to_path(loc: tuple[Any, ...], data: Any) -> Path:
    """Map a pydantic error location onto the data, dropping union tags and validator names."""
    path: list[str | int] = []
    cur = data
    for i, part in enumerate(loc):
        is_key = isinstance(cur, dict) and isinstance(part, str) and part in cur
        is_index = isinstance(cur, list) and isinstance(part, int) and part < len(cur)
        if is_key or is_index:
            path.append(part)
            cur = cur[part]
        elif isinstance(part, str) and _MEMBER.match(part):
            continue  # a union member's name (`literal['policy']`, `function-after[...]`), not a key
        elif i == len(loc) - 1 and isinstance(part, str) and isinstance(cur, dict):
            path.append(part)  # a missing key
    return tuple(path)
