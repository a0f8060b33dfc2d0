"""Walk two JSON schemas (upstream's, primenb's) side by side and list where they differ.

A difference is `(path, aspect, upstream, primenb)`: `path` is a dotted TOML path (a union
member's tag in `<...>`, an array's items as `[]`), `aspect` one of `key` (a key only one side
knows), `type`, `enum`, `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`, `default`,
`closed` (unknown keys refused or not), `required`, `tags` (a discriminated union's members).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
Difference = tuple[str, str, Any, Any]


class Schema:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.defs = doc.get("$defs", {})

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = {**self.defs[node["$ref"].rsplit("/", 1)[-1]], **extra}
        return node

    def members(self, node: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives of a node (itself when it is not a union)."""
        node = self.resolve(node)
        alts = node.get("anyOf") or node.get("oneOf")
        if not alts:
            return [node]
        out = []
        for alt in alts:
            out += [m for m in self.members(alt) if m.get("type") != "null"]
        return out

    def nullable(self, node: dict[str, Any]) -> bool:
        node = self.resolve(node)
        alts = node.get("anyOf") or node.get("oneOf") or []
        return node.get("type") == "null" or any(self.nullable(a) for a in alts)

    def discriminator(self, node: dict[str, Any]) -> tuple[str, dict[str, dict[str, Any]]] | None:
        """(tag key, tag -> member) of a tagged union: from pydantic's `discriminator` mapping,
        or (a callable discriminator's schema has none) from each member's own tag default."""
        node = self.resolve(node)
        for alt in [node, *(node.get("anyOf") or [])]:
            alt = self.resolve(alt)
            disc = alt.get("discriminator")
            if disc:
                tags = {tag: self.resolve({"$ref": ref}) for tag, ref in disc["mapping"].items()}
                return disc["propertyName"], tags
        objects = [m for m in self.members(node) if "properties" in m]
        for key in ("type", "name"):
            found = {}
            for m in objects:
                prop = self.resolve(m["properties"].get(key, {}))
                tag = prop.get("const", prop.get("default"))
                if isinstance(tag, str) and ("const" in prop or "enum" in prop):
                    found[tag] = m
            if len(objects) > 1 and len(found) == len(objects):
                return key, found
        return None


def _types(s: Schema, node: dict[str, Any]) -> frozenset[str]:
    out = set()
    for m in s.members(node):
        t = m.get("type")
        if "const" in m or "enum" in m:
            out.add("enum")
        elif isinstance(t, list):
            out.update(t)
        elif t:
            out.add(t)
        elif "properties" in m:
            out.add("object")
        else:
            out.add("any")
    if "integer" in out and "number" in out:
        out.discard("integer")
    return frozenset(out)


def _enum(s: Schema, node: dict[str, Any]) -> frozenset[Any] | None:
    values: set[Any] = set()
    for m in s.members(node):
        if "const" in m:
            values.add(m["const"])
        values.update(m.get("enum", ()))
    return frozenset(values) if values else None


def _bound(s: Schema, node: dict[str, Any], name: str) -> Any:
    found = [m[name] for m in s.members(node) if name in m]
    return found[0] if found else None


def _objects(s: Schema, node: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in s.members(node) if m.get("type") == "object" and "properties" in m]


def _items(s: Schema, node: dict[str, Any]) -> dict[str, Any] | None:
    for m in s.members(node):
        if m.get("type") == "array" and isinstance(m.get("items"), dict):
            return m["items"]
    return None


def _default(node: dict[str, Any]) -> Any:
    return json.dumps(node["default"], sort_keys=True) if "default" in node else None


def compare(up: Schema, mine: Schema, a: dict[str, Any], b: dict[str, Any], path: str = "") -> Iterator[Difference]:
    """Every difference between upstream's node `a` and primenb's node `b` at `path`."""
    ra, rb = up.resolve(a), mine.resolve(b)
    if path:
        ta, tb = (
            _types(up, a) | ({"null"} if up.nullable(a) else set()),
            _types(mine, b) | ({"null"} if mine.nullable(b) else set()),
        )
        if ta != tb:
            yield (path, "type", sorted(ta), sorted(tb))
        ea, eb = _enum(up, a), _enum(mine, b)
        if ea != eb:
            yield (path, "enum", sorted(map(str, ea or ())), sorted(map(str, eb or ())))
        for name in BOUNDS:
            if _bound(up, a, name) != _bound(mine, b, name):
                yield (path, name, _bound(up, a, name), _bound(mine, b, name))
        # a table's default is its keys' defaults, compared key by key; an absent default is a
        # required key (`required`) or a factory's, not a value to compare
        if "default" in ra and "default" in rb and not _objects(up, a) and _default(ra) != _default(rb):
            yield (path, "default", _default(ra), _default(rb))
    da, db = up.discriminator(a), mine.discriminator(b)
    if da or db:
        tags_a = set(da[1]) if da else set()
        tags_b = set(db[1]) if db else set()
        if tags_a != tags_b or (da and db and da[0] != db[0]):
            yield (path, "tags", sorted(tags_a), sorted(tags_b))
        for tag in sorted(tags_a & tags_b):
            assert da and db
            yield from _compare_object(up, mine, da[1][tag], db[1][tag], f"{path}<{tag}>")
        return
    oa, ob = _objects(up, a), _objects(mine, b)
    if len(oa) == 1 and len(ob) == 1:
        yield from _compare_object(up, mine, oa[0], ob[0], path)
    elif oa or ob:
        if len(oa) != len(ob):
            yield (path, "type", f"{len(oa)} table kinds", f"{len(ob)} table kinds")
        for i, (x, y) in enumerate(zip(oa, ob, strict=False)):
            yield from _compare_object(up, mine, x, y, f"{path}<{i}>")
    ia, ib = _items(up, a), _items(mine, b)
    if ia is not None and ib is not None:
        yield from compare(up, mine, ia, ib, f"{path}[]")


def _compare_object(up: Schema, mine: Schema, a: dict[str, Any], b: dict[str, Any], path: str) -> Iterator[Difference]:
    pa, pb = a.get("properties", {}), b.get("properties", {})
    closed_a, closed_b = a.get("additionalProperties") is False, b.get("additionalProperties") is False
    if closed_a != closed_b:
        yield (path, "closed", closed_a, closed_b)
    if set(a.get("required", ())) != set(b.get("required", ())):
        yield (path, "required", sorted(a.get("required", ())), sorted(b.get("required", ())))
    for key in sorted(set(pa) | set(pb)):
        sub = f"{path}.{key}" if path else key
        if key not in pb:
            yield (sub, "key", "known", "unknown")
        elif key not in pa:
            yield (sub, "key", "unknown", "known")
        else:
            yield from compare(up, mine, pa[key], pb[key], sub)


def differences(upstream: dict[str, Any], primenb: dict[str, Any]) -> list[Difference]:
    up, mine = Schema(upstream), Schema(primenb)
    return list(_compare_object(up, mine, up.resolve(upstream), mine.resolve(primenb), ""))
