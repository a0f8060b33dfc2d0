"""primenb's config schema against upstream's own (`RLConfig`/`SFTConfig.model_json_schema()` of
prime-rl-configs 0.4.0, kept in `tests/data/upstream-schema/`): every table and key, type, enum,
bound, default, discriminator and unknown-key policy agrees, or the difference is in the one
allow-list (`upstream_schema_allowlist.py`) with its reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primenb.config.schema import RLConfig, SFTConfig
from tests.config.schema_compare import differences
from tests.config.upstream_schema_allowlist import ALLOWED

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream-schema"


def _found() -> set[tuple[str, str, str]]:
    out = set()
    for name, cls in (("rl", RLConfig), ("sft", SFTConfig)):
        upstream = json.loads((DATA / f"{name}.schema.json").read_text())
        out |= {(name, path, aspect) for path, aspect, _, _ in differences(upstream, cls.model_json_schema())}
    return out


FOUND = _found()


def test_every_difference_is_allowed_with_a_reason():
    new = sorted(FOUND - set(ALLOWED))
    assert not new, f"primenb's schema drifted from upstream's (fix it, or allow it with a reason): {new[:20]}"
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_allow_list_holds_no_stale_entry():
    stale = sorted(set(ALLOWED) - FOUND)
    assert not stale, f"these differences are gone; remove them from the allow-list: {stale[:20]}"


@pytest.mark.parametrize(
    "path,aspect",
    [
        ("orchestrator.env_server_base_port", "maximum"),  # issue 23: 65536 accepted before
        ("inference.vllm.gpu_memory_utilization", "maximum"),  # issue 23: upstream has no bound
        ("trainer.model.deepep_num_sms", "key"),
        ("trainer.model.index_cache", "key"),
        ("inference.router", "tags"),
    ],
)
def test_cases_fixed_by_issue_23_stay_fixed(path, aspect):
    assert ("rl", path, aspect) not in FOUND
