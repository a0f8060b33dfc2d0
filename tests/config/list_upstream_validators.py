"""Regenerate `tests/data/upstream/validators.txt`: every validator of prime-rl-configs.

    python tests/config/list_upstream_validators.py SRC > tests/data/upstream/validators.txt

SRC is the package's source folder: `packages/prime-rl-configs/src` of a prime-rl checkout
(0.4.0 is commit 559b447), or an unpacked sdist/wheel holding `prime_rl/`. The script only reads
the files (`ast`), so it needs neither pydantic nor the package's dependencies.

One line per validator: `FILE CLASS.FUNCTION KIND`, where KIND is `model_validator(MODE)`,
`field_validator(MODE)`, or `AfterValidator` / `BeforeValidator` / `PlainValidator` /
`WrapValidator` for a validator attached with `Annotated[...]` (CLASS is then the alias or the
class whose field carries it). `docs/upstream-validators.md` maps each line to the primenb rule
that mirrors it, or says why none does; `tests/config/test_upstream_validators.py` holds the two
together.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

_DECORATORS = ("model_validator", "field_validator")
_ANNOTATED = ("AfterValidator", "BeforeValidator", "PlainValidator", "WrapValidator")


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _mode(call: ast.Call, default: str) -> str:
    for kw in call.keywords:
        if kw.arg == "mode" and isinstance(kw.value, ast.Constant):
            return str(kw.value.value)
    return default


def _decorated(cls: ast.ClassDef) -> Iterator[tuple[str, str]]:
    for item in cls.body:
        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for dec in item.decorator_list:
            call = dec if isinstance(dec, ast.Call) else None
            name = _name(call.func if call else dec)
            if name in _DECORATORS:
                mode = _mode(call, "after") if call else "after"
                yield f"{cls.name}.{item.name}", f"{name}({mode})"


def _annotated(owner: str, node: ast.AST) -> Iterator[tuple[str, str]]:
    """`AfterValidator(f)` anywhere inside an annotation or an alias's value."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and _name(sub.func) in _ANNOTATED and sub.args:
            yield f"{owner}.{_name(sub.args[0]) or 'lambda'}", _name(sub.func)


def validators(src: Path) -> Iterator[str]:
    root = src / "prime_rl"
    for file in sorted(root.rglob("*.py")):
        tree = ast.parse(file.read_text(), filename=str(file))
        rel = file.relative_to(root).as_posix()
        found: list[tuple[str, str]] = []
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                found += _decorated(node)
                for item in node.body:
                    if isinstance(item, ast.AnnAssign):
                        found += _annotated(node.name, item.annotation)
            elif isinstance(node, (ast.AnnAssign, ast.Assign)) and node.value is not None:
                target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                found += _annotated(_name(target), node.value)
        for name, kind in found:
            yield f"{rel} {name} {kind}"


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (Path(argv[0]) / "prime_rl").is_dir():
        print(__doc__, file=sys.stderr)
        return 2
    for line in validators(Path(argv[0])):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
