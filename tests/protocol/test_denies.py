"""One answer to "does this run deny data collection?" (`primenb.protocol.privacy.denies`): the
engine, the hosted mirror and launch, the trace page, the server and the eval each find the run's
privacy settings and ask it, so no copy of the rule can drift from the others."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import primenb
from primenb.protocol.privacy import config_denies, denies, run_denies, trace_denies
from primenb.protocol.rundir import RunDir

ROOT = Path(primenb.__file__).parent
RULE = ROOT / "protocol" / "privacy.py"


def _spells_the_rule(node: ast.AST) -> bool:
    """A comparison against the deny value: `x == "deny"`, `"deny" != y`, `x in ("deny",)`, `x == DENY`."""
    if not isinstance(node, ast.Compare):
        return False
    for side in [node.left, *node.comparators]:
        for part in ast.walk(side):
            if isinstance(part, ast.Constant) and part.value == "deny":
                return True
            if isinstance(part, ast.Name | ast.Attribute) and getattr(part, "id", getattr(part, "attr", "")) == "DENY":
                return True
    return False


def test_only_the_privacy_module_compares_with_the_deny_value() -> None:
    copies = []
    for path in sorted(ROOT.rglob("*.py")):
        if path == RULE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        copies += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(tree) if _spells_the_rule(n)]
    assert copies == [], f"ask primenb.protocol.privacy.denies (or its readers) instead: {copies}"


def test_the_rule_itself_is_compared_once() -> None:
    tree = ast.parse(RULE.read_text(encoding="utf-8"))
    assert len([n for n in ast.walk(tree) if _spells_the_rule(n)]) == 1


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"data_collection": "deny"}, True),
        ({"data_collection": "allow"}, False),
        ({}, False),
        (None, False),
        ("deny", False),  # not a settings table
        (SimpleNamespace(data_collection="deny"), True),  # a parsed section, the engine's plan
        (SimpleNamespace(data_collection="allow"), False),
        (SimpleNamespace(), False),
    ],
)
def test_denies_reads_a_table_or_a_section(settings: Any, expected: bool) -> None:
    assert denies(settings) is expected


def test_config_and_trace_readers_find_the_settings_where_each_document_keeps_them() -> None:
    assert config_denies({"primenb": {"privacy": {"data_collection": "deny"}}})
    assert not config_denies({"primenb": {"privacy": {"data_collection": "allow"}}})
    assert not config_denies({"primenb": {"privacy": "deny"}})
    assert not config_denies({})
    assert config_denies(None)  # a config that cannot be read as a table counts as denying
    assert trace_denies({"privacy": {"data_collection": "deny"}})
    assert not trace_denies({"privacy": None})
    assert not trace_denies({})


def test_a_run_whose_config_cannot_be_read_counts_as_denying(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.root.mkdir()
    assert run_denies(run)  # no config at all
    run.resolved_config.parent.mkdir(parents=True, exist_ok=True)
    run.resolved_config.write_text("{not json", encoding="utf-8")
    assert run_denies(run)
    run.resolved_config.write_text('{"primenb": {"privacy": {"data_collection": "allow"}}}', encoding="utf-8")
    assert not run_denies(run)
    run.resolved_config.write_text('{"primenb": {"privacy": {"data_collection": "deny"}}}', encoding="utf-8")
    assert run_denies(run)


def test_a_hosted_launch_reads_the_parsed_config_with_the_same_rule() -> None:
    from primenb.backends.modelfactory import _denies

    def config(privacy: Any) -> Any:
        return SimpleNamespace(model=SimpleNamespace(primenb=SimpleNamespace(privacy=privacy)))

    assert _denies(config(SimpleNamespace(data_collection="deny")))
    assert not _denies(config(SimpleNamespace(data_collection="allow")))
    assert not _denies(SimpleNamespace(model=SimpleNamespace()))
