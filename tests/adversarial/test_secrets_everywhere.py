"""Secrets by name, shape and place, once (issue 42): one rule (`primenb.protocol.hashing`) for
secret names in any spelling (`api-key`, `apiKey`, `X-Api-Key`, `Authorization`, `Cookie`,
`accessToken`, ...), secret-shaped values (PEM private keys, `github_pat_`, `ghp_`, `sk-`, `hf_`,
JWTs, AWS keys, bearer credentials) and the userinfo of any URI, applied in every place a
credential was found to land: configs in strict and lenient mode (an `[orchestrator.model.client]
headers` table included), a trace's recorded tracker location (written and read), the engine's
launcher log (what libraries print there) and exports. Generated: names x values x places;
`${VAR}` placeholders stay fine."""

from __future__ import annotations

import io
import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from primenb.config import check
from primenb.protocol.hashing import has_credential, is_secret_name, redact, redact_text
from tests.adversarial.conftest import rl_text
from tests.homes import plain_home  # noqa: F401  (this folder's conftest has a work/ home; these take the plain one)

_ALNUM = string.ascii_letters + string.digits
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _word(alphabet: str, lo: int, hi: int) -> st.SearchStrategy[str]:
    return st.text(alphabet, min_size=lo, max_size=hi)


# -- names: words joined in every spelling -------------------------------------------------------

SECRET_WORDS = [
    ["api", "key"],
    ["access", "token"],
    ["token"],
    ["password"],
    ["secret"],
    ["private", "key"],
    ["authorization"],
    ["cookie"],
    ["credentials"],
    ["passphrase"],
    ["secret", "access", "key"],
    ["client", "secret"],
]
PREFIXES = [[], ["x"], ["my"], ["db"], ["openai"], ["proxy"], ["set"], ["hf"]]


def _spell(words: list[str], style: str) -> str:
    if style == "snake":
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "upper":
        return "_".join(words).upper()
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    if style == "pascal":
        return "".join(w.capitalize() for w in words)
    if style == "header":  # X-Api-Key, Proxy-Authorization
        return "-".join(w.capitalize() for w in words)
    return ".".join(words)  # dotted


NAMES = st.builds(
    lambda p, w, style: _spell([*p, *w], style),
    st.sampled_from(PREFIXES),
    st.sampled_from(SECRET_WORDS),
    st.sampled_from(["snake", "kebab", "upper", "camel", "pascal", "header", "dotted"]),
)
INNOCENT_NAMES = st.sampled_from(
    ["max_tokens", "api_key_var", "maxTokens", "pad_token_id", "num-tokens", "tokenizer", "key_count", "note"]
)

# -- values: credential shapes --------------------------------------------------------------------

_PEM_BODY = _word(_ALNUM + "+/", 40, 120)
SHAPES = st.one_of(
    _word(_ALNUM, 20, 40).map(lambda s: "hf_" + s),
    _word(_ALNUM + "_-", 16, 48).map(lambda s: "sk-" + s),
    st.tuples(st.sampled_from("pousr"), _word(_ALNUM, 20, 40)).map(lambda t: f"gh{t[0]}_{t[1]}"),
    _word(_ALNUM + "_", 22, 82).map(lambda s: "github_pat_" + s),
    _word(string.ascii_uppercase + string.digits, 16, 16).map(lambda s: "AKIA" + s),
    st.tuples(_word(_ALNUM, 20, 30), _word(_ALNUM, 10, 20), _word(_ALNUM, 10, 20)).map(
        lambda t: f"eyJ{t[0]}.{t[1]}.{t[2]}"
    ),
    st.tuples(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]), _PEM_BODY).map(
        lambda t: f"-----BEGIN {t[0]}PRIVATE KEY-----\n{t[1]}\n-----END {t[0]}PRIVATE KEY-----"
    ),
    _word(_ALNUM + "._-", 16, 40).map(lambda s: "Bearer " + s),
    st.tuples(
        st.sampled_from(["http", "https", "postgresql", "mongodb+srv", "redis"]),
        _word(string.ascii_lowercase, 1, 8),
        _word(_ALNUM, 1, 16),
    ).map(lambda t: f"{t[0]}://{t[1]}:Pw{t[2]}Zq@tracking.example.org:5000/x"),
)
# what a value under a secret name may be: anything written, shaped or not
PLAIN = _word(_ALNUM + "-_.", 6, 24)


def _secret_part(value: str) -> str:
    """The part of ``value`` that must never be seen (a URI's password, the body of a PEM)."""
    if "://" in value:
        return value.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    if value.startswith("-----BEGIN"):
        return value.split("\n")[1]
    return value.removeprefix("Bearer ")


def _toml_string(value: str) -> str:
    return json.dumps(value)  # a TOML basic string for these characters


# -- configs: every mode --------------------------------------------------------------------------


@st.composite
def config_cases(draw: st.DrawFn) -> tuple[str, bool]:
    where = draw(st.sampled_from(["headers", "primenb", "unknown-table", "env-vars-like"]))
    by_name = draw(st.booleans())
    if by_name:
        name, value = draw(NAMES), draw(st.one_of(PLAIN, SHAPES))
    else:
        name, value = draw(INNOCENT_NAMES), draw(SHAPES)
    pair = f"{_toml_string(name)} = {_toml_string(value)}"
    text = rl_text()
    if where == "headers":
        text += f"\n[orchestrator.model.client]\nheaders = {{ {pair} }}\n"
    elif where == "primenb":
        text = text.replace("[primenb]\n", f"[primenb]\n{pair}\n", 1)
    elif where == "unknown-table":
        text += f"\n[orchestrator.future_part]\n{pair}\n"
    else:
        text += f"\n[orchestrator.future_headers]\nextra = {{ inner = {{ {pair} }} }}\n"
    lenient = draw(st.booleans())
    return text, lenient


@SETTINGS
@given(case=config_cases())
def test_a_secret_never_validates_in_any_mode(case: tuple[str, bool]) -> None:
    text, lenient = case
    report = check(text, lenient=lenient).report
    assert [d for d in report.errors if d.code == "secret"], report.to_text()


@settings(max_examples=60, deadline=None)
@given(name=NAMES, var=_word(string.ascii_uppercase, 1, 12), bearer=st.booleans(), lenient=st.booleans())
def test_a_placeholder_under_a_secret_name_validates(name: str, var: str, bearer: bool, lenient: bool) -> None:
    value = ("Bearer " if bearer else "") + "${" + var + "}"
    text = rl_text() + f"\n[orchestrator.model.client]\nheaders = {{ {_toml_string(name)} = {_toml_string(value)} }}\n"
    report = check(text, lenient=lenient).report
    assert not [d for d in report.errors if d.code == "secret"], report.to_text()
    assert not has_credential(f"https://${{{var}}}:${{{var}}}@host/x")  # a URI's placeholder userinfo


# -- the rule itself: names in every spelling, values anywhere in a text --------------------------


@SETTINGS
@given(name=NAMES, value=st.one_of(PLAIN, SHAPES))
def test_every_spelling_of_a_secret_name_is_one_name(name: str, value: str) -> None:
    assert is_secret_name(name), name
    shown = json.dumps(redact({"client": {"headers": {name: value}}}))
    assert _secret_part(value) not in shown


@SETTINGS
@given(
    value=SHAPES,
    before=st.sampled_from(["", "error: ", "🏃 View run gentle-fox at: ", "url=", "connect to ", "note "]),
    after=st.sampled_from(["", " failed", "/#/experiments/1/runs/abc", "\nnext line"]),
)
def test_a_secret_shape_is_hidden_wherever_it_sits_in_a_text(value: str, before: str, after: str) -> None:
    assert _secret_part(value) not in redact_text(before + value + after)


@pytest.mark.parametrize("name", ["max_tokens", "api_key_var", "maxTokens", "pad_token_id", "num-tokens", "tokenizer"])
def test_names_that_only_look_close_are_not_secrets(name: str) -> None:
    assert not is_secret_name(name)


# -- recorded places: the trace's tracker location, the launcher log, exports ---------------------


def _uri(user: str, password: str) -> str:
    return f"http://{user}:{password}@mlflow.example.org:5000"


@SETTINGS
@given(user=_word(string.ascii_lowercase, 1, 8), password=_word(_ALNUM, 1, 16).map(lambda s: f"Pw{s}Zq"), value=SHAPES)
def test_a_trackers_location_is_stored_and_read_redacted(home: Path, user: str, password: str, value: str) -> None:
    """The engine records where each tracker run lives (MLflow reports MLFLOW_TRACKING_URI as it
    was given): written redacted, and a trace written before (or copied in) is read redacted, so
    the sidebar's run detail and the index never show it."""
    import tempfile

    from primenb.protocol.record import read_trace, write_trace

    run_dir = Path(tempfile.mkdtemp(dir=home))
    where = {"mlflow": {"uri": _uri(user, password), "run_id": "abc"}, "other": {"url": value}}
    write_trace(run_dir, {"trace_id": "0123456789", "trackers": json.loads(json.dumps(where))})
    stored = (run_dir / "trace.json").read_text()
    assert password not in stored and _secret_part(value) not in stored
    # a trace.json written by something else (an old engine, a copied folder): read redacted
    (run_dir / "trace.json").write_text(json.dumps({"trace_id": "0123456789", "trackers": where}))
    read = json.dumps(read_trace(run_dir))
    assert password not in read and _secret_part(value) not in read


@SETTINGS
@given(
    password=_word(_ALNUM, 1, 16).map(lambda s: f"Pw{s}Zq"),
    name=NAMES.filter(lambda n: any(w in n.lower() for w in ("authorization", "cookie"))),
    value=SHAPES,
    chunk=st.integers(1, 40),
)
def test_what_libraries_print_to_the_launcher_log_is_redacted(password: str, name: str, value: str, chunk: int) -> None:
    """MLflow prints "View run ... at: <tracking URI>" to the engine's stderr itself (twice), past the
    engine's log filter; a client may dump its headers. The engine's streams apply the rule to
    whole lines, however the library splits its writes."""
    from primenb.protocol.privacy import RedactingStream

    sink = io.StringIO()
    stream = RedactingStream(sink)
    text = (
        f"🏃 View run gentle-fox at: {_uri('user', password)}/#/experiments/1/runs/abc\n"
        f"🧪 View experiment at: {_uri('user', password)}/#/experiments/1\n"
        f"{name}: {value}\n"
        f"token in prose {value} end\n"
        "progress 50%"
    )
    for i in range(0, len(text), chunk):
        stream.write(text[i : i + chunk])
    stream.flush()
    out = sink.getvalue()
    assert password not in out and _secret_part(value) not in out
    assert "View run gentle-fox at: http://" in out and out.endswith("progress 50%")


def test_an_engine_run_with_a_password_in_its_tracking_uri_keeps_it_nowhere(home: Path) -> None:
    """The engine process itself: its stdout and stderr are the redacting streams."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from primenb.engine import runner\n"
        "runner._main = lambda argv: (print('View run at: http://u:hunter2secret@h:5000/#/r'), "
        "sys.stderr.write('Authorization: Bearer abcdefghijklmnop0123\\n'), 0)[-1]\n"
        "sys.exit(runner.main(['x']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "hunter2secret" not in proc.stdout + proc.stderr and "abcdefghijklmnop0123" not in proc.stderr
    assert "View run at: http://***redacted***@h:5000" in proc.stdout


def test_an_export_of_a_trace_recorded_before_the_rule_holds_no_password(home: Path) -> None:
    import primenb.harness as h
    from primenb.protocol.record import write_trace

    run_dir = home / "old-run"
    (run_dir / "configs").mkdir(parents=True)
    (run_dir / "configs" / "config.toml").write_text("")
    write_trace(run_dir, {"trace_id": "0123456789ab", "status": "completed", "name": "old"})
    doc: dict[str, Any] = json.loads((run_dir / "trace.json").read_text())
    doc["trackers"] = {"mlflow": {"uri": _uri("me", "pa55word-old"), "run_id": "r"}}
    headers = {"Authorization": "Bearer pa55word-old-bearer", "X-Api-Key": "pa55word-old"}
    doc["config"] = {"orchestrator": {"model": {"client": {"headers": headers}}}}
    (run_dir / "trace.json").write_text(json.dumps(doc))  # as an engine before this rule wrote it
    bundle = h.export(str(run_dir), str(home / "bundle"))
    assert "pa55word-old" not in (bundle / "trace.json").read_text()
    from primenb.protocol.index import index_trace
    from primenb.protocol.record import read_trace
    from primenb.server import data

    index_trace(read_trace(run_dir) or {}, run_dir)
    assert "pa55word-old" not in json.dumps(data.trace_detail("0123456789ab"), default=str)
