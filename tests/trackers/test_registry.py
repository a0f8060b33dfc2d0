"""The trackers are declared once (`primenb.trackers.registry`, named in `primenb.tracker_kinds`):
the config's ``report_to``, the magic's and the CLI's ``export --to``, an export's refusal of an
unknown name and the docs offer the same trackers in the same order, so none can drift."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import get_args

import pytest

from primenb.cli import build_parser
from primenb.config.schema.common import PrimenbSettings
from primenb.errors import PrimenbError
from primenb.notebook.args import magic_parser
from primenb.tracker_kinds import TRACKER_KINDS
from primenb.trackers import KINDS, TRACKERS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_named_tracker_has_its_sink_in_the_registry_order() -> None:
    assert tuple(TRACKERS) == TRACKER_KINDS == KINDS
    assert all(cls.kind == kind for kind, cls in TRACKERS.items())


def test_the_config_accepts_exactly_the_registered_trackers() -> None:
    (kind,) = get_args(PrimenbSettings.model_fields["report_to"].annotation)
    assert get_args(kind) == tuple(TRACKERS)
    assert PrimenbSettings(report_to=list(TRACKERS)).report_to == list(TRACKERS)
    with pytest.raises(ValueError, match="report_to"):
        PrimenbSettings(report_to=["comet"])


def _to_choices(parser: argparse.ArgumentParser) -> tuple[str, ...]:
    (to,) = [a for a in parser._actions if a.dest == "to"]
    return tuple(to.choices or ())


def test_export_to_offers_the_registered_trackers_in_both_faces() -> None:
    assert _to_choices(magic_parser("harness", "export")) == tuple(TRACKERS)
    cli = build_parser()
    (families,) = [a for a in cli._actions if isinstance(a, argparse._SubParsersAction)]
    harness = families.choices["harness"]
    (verbs,) = [a for a in harness._actions if isinstance(a, argparse._SubParsersAction)]
    assert _to_choices(verbs.choices["export"]) == tuple(TRACKERS)


def test_export_without_a_folder_names_every_tracker() -> None:
    from primenb.commands import HarnessExportArgs
    from primenb.verbs.harness import export

    args = HarnessExportArgs(trace="t", path=None, to=None)
    with pytest.raises(PrimenbError) as err:
        export(args, None)  # refused before the face is used
    assert f"--to {'|'.join(TRACKERS)}" in str(err.value)


def test_an_export_to_an_unknown_tracker_lists_the_registered_ones() -> None:
    from primenb.traces.backfill import backfill

    with pytest.raises(PrimenbError, match=re.escape(", ".join(TRACKERS))):
        backfill("no-such-trace", "comet")


def test_the_trackers_guide_lists_the_registered_trackers() -> None:
    text = (DOCS / "trackers.md").read_text(encoding="utf-8")
    listed = re.search(r"report_to = .*# any of (.+)", text)
    assert listed is not None
    assert tuple(listed.group(1).strip().split(", ")) == tuple(TRACKERS)


def test_every_export_to_the_docs_spell_out_offers_the_registered_trackers() -> None:
    spelled = [
        (path.name, found)
        for path in [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]
        for found in re.findall(r"--to ([a-z]+(?:\|[a-z]+)+)", path.read_text(encoding="utf-8"))
    ]
    assert spelled, "the docs name the trackers an export may go to"
    assert [(name, found) for name, found in spelled if found != "|".join(TRACKERS)] == []
