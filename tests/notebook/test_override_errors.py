"""An invalid ``key=value`` override (the harness browser's box, ``%prime_harness apply --set``)
is reported on the override the user typed, not on a line of the derived TOML, which quoted the
parent's config as if it were the user's cell."""

from __future__ import annotations

from typing import Any

import pytest

from primenb.config.tomledit import edited_config
from primenb.errors import PrimenbError
from tests.tiny import rl_toml


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (("trainer.optim.lr", "abc"), 'the override trainer.optim.lr="abc": expected a number'),
        (("orchestrator.batch_size", 7), "the override orchestrator.batch_size=7: batch_size (7) must be divisible"),
        (("trainer.optim.lrr", 1e-3), "the override trainer.optim.lrr=0.001: unknown key `lrr`"),
    ],
)
def test_an_override_error_names_the_override(override: tuple[str, Any], says: str) -> None:
    with pytest.raises(PrimenbError) as caught:
        edited_config(rl_toml(steps=4), [override])
    text = str(caught.value)
    assert says in text, text
    # one header naming the config, not "the new run's config:" before every line; a misspelt key
    # gets its suggestion
    assert text.count("the new run's config") == 1 and text.startswith("the new run's config is not valid (1 error):")
    if override[0].endswith("lrr"):
        assert "did you mean `lr`?" in text, text
    assert "<cell>" not in text and " | " not in text, text  # no line of a TOML the user never wrote


def test_a_problem_the_override_did_not_cause_keeps_its_line() -> None:
    parent = rl_toml(steps=4).replace("batch_size = 8", "batch_size = 7")  # already wrong in the parent
    with pytest.raises(PrimenbError) as caught:
        edited_config(parent, [("trainer.optim.lr", 1e-5)])
    text = str(caught.value)
    assert "batch_size = 7" in text and "the override" not in text, text
    assert text.count("the new run's config") == 1 and "\nline " in text, text  # its line, said once
