"""Issue 31, "lenient never lowers the secret rule": `--lenient` let a credential under an unknown
key validate, and `train --lenient` wrote it verbatim to the run's configs/config.toml (7 token
shapes, and under `[primenb]`). The class: the credential scan runs on every value of the text as
written, whatever the mode, and a `Config` never holds one, so none is written anywhere.
Variants are generated: every shape, under an unknown key at any depth, a known key, a secret
name, `[primenb]`, an inline table or an array; lenient by flag, by `[primenb] lenient`, or not.
"""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.config import Config, check, load_config
from primenb.errors import ConfigError, PrimenbError
from tests.adversarial.conftest import rl_text, tree

_ALNUM = string.ascii_letters + string.digits
_UPPER = string.ascii_uppercase + string.digits


def _word(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=lo, max_size=hi)


# the credential shapes the rule knows (`primenb.protocol.hashing`), each with its own variants
TOKENS = st.one_of(
    _word(_ALNUM, 20, 40).map(lambda s: "hf_" + s),  # Hugging Face
    _word(_ALNUM + "_-", 16, 48).map(lambda s: "sk-" + s),  # OpenAI-style API keys
    st.tuples(st.sampled_from("pousr"), _word(_ALNUM, 20, 40)).map(lambda t: f"gh{t[0]}_{t[1]}"),  # GitHub
    st.tuples(st.sampled_from("abprs"), _word(_ALNUM + "-", 10, 30)).map(lambda t: f"xox{t[0]}-{t[1]}"),  # Slack
    _word(_UPPER, 16, 16).map(lambda s: "AKIA" + s),  # AWS access key id
    st.tuples(_word(_ALNUM, 20, 30), _word(_ALNUM, 10, 20), _word(_ALNUM, 10, 20)).map(
        lambda t: f"eyJ{t[0]}.{t[1]}.{t[2]}"  # a JWT
    ),
    st.tuples(_word(string.ascii_lowercase, 1, 8), _word(_ALNUM, 1, 12)).map(
        lambda t: f"https://{t[0]}:{t[1]}@example.org/v1"  # a URL's password
    ),
)
_KEY = _word(string.ascii_lowercase, 1, 8).map(lambda s: "future_" + s)  # no key prime-rl knows


@st.composite
def hostile(draw: st.DrawFn) -> tuple[str, str, bool]:
    """(config text, the token, lenient flag): a token placed where a lenient run used to drop it."""
    token = draw(TOKENS)
    key = draw(_KEY)
    depth = draw(st.lists(_KEY, max_size=3))
    place = draw(st.sampled_from(["unknown-table", "unknown-key", "primenb", "inline", "array", "secret-name"]))
    text = rl_text()
    if place == "unknown-table":
        block = f"\n[{'.'.join(['orchestrator', *depth, key])}]\nvalue = {token!r}\n".replace("'", '"')
        text += block
    elif place == "unknown-key":
        text = text.replace("[orchestrator]\n", f'[orchestrator]\n{key} = "{token}"\n', 1)
    elif place == "primenb":
        text = text.replace("[primenb]\n", f'[primenb]\n{key} = "{token}"\n', 1)
    elif place == "inline":
        text = text.replace("[trainer.optim]\n", f'[trainer.optim]\n{key} = {{ inner = "{token}", }}\n', 1)
    elif place == "array":
        text = text.replace("[orchestrator]\n", f'[orchestrator]\n{key} = ["--hf-token", "{token}"]\n', 1)
    else:  # a secret-looking name: any value is a secret there
        text = text.replace("[primenb]\n", f'[primenb]\n{key}_api_key = "{token}"\n', 1)
    how = draw(st.sampled_from(["flag", "table", "strict"]))
    if how == "table":
        text = text.replace("[primenb]\n", "[primenb]\nlenient = true\n", 1)
    return text, token, how == "flag"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=hostile())
def test_a_credential_never_validates_in_any_mode(case: tuple[str, str, bool]) -> None:
    text, token, lenient = case
    report = check(text, lenient=lenient).report
    secrets = [d for d in report.errors if d.code == "secret"]
    assert secrets, report.to_text()
    assert all(d.line for d in secrets)
    assert token not in report.to_text() and token not in report.to_json()  # the report never shows it
    with pytest.raises(ConfigError):
        load_config(text, lenient=lenient)


def test_train_lenient_writes_no_config_holding_a_credential(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reported path: `primenb train --lenient` on a config with a token under an unknown key.
    The engine is never started here (a regression would write the run directory, then stop)."""
    import subprocess

    from primenb.cli import main

    def no_engine(*a: object, **k: object) -> None:
        raise AssertionError("the engine was started")

    monkeypatch.setattr(subprocess, "Popen", no_engine)
    token = "hf_" + "a1B2" * 8
    path = home / "rl.toml"
    path.write_text(rl_text().replace("[primenb]\n", f'[primenb]\nfuture_token_store = "{token}"\n', 1))
    before = tree(home.parent)
    rc = main(["train", "--lenient", str(path)])
    assert rc != 0
    assert tree(home.parent) == before  # no run directory, no configs/config.toml, nothing at all
    for file in home.parent.rglob("*"):
        assert not file.is_file() or file == path or token not in file.read_text(errors="replace")


def test_placeholder_is_not_a_secret_but_a_literal_still_is() -> None:
    """Issue 32: `${HF_TOKEN}` names a variable (upstream accepts it); a literal never validates,
    and its hint says a placeholder would."""
    base = rl_text() + '\n[env_vars]\nNCCL_DEBUG = "INFO"\n'
    assert check(base + 'HF_TOKEN = "${HF_TOKEN}"\n').report.ok
    report = check(base + 'HF_TOKEN = "hf_literal"\n').report
    [err] = [d for d in report.errors if d.code == "secret"]
    assert err.path == "env_vars.HF_TOKEN" and "${HF_TOKEN}" in err.hint


def test_config_refuses_a_text_with_a_credential_whatever_built_it() -> None:
    """The last guard before any write: a `Config` built around a valid model but a text holding a
    token (a caller that skipped validation) refuses to exist."""
    valid = load_config(rl_text())
    leaked = rl_text().replace("[primenb]\n", '[primenb]\nnote = "https://me:pw@host/x"\n', 1)
    with pytest.raises(PrimenbError, match=r"credential at primenb\.note"):
        Config(valid.model, mode=valid.mode, text=leaked, report=valid.report)
