"""Issue 31, generated variants per class (Hypothesis, 200 examples each; records and lenient
secrets have theirs in `test_server_records.py` and `test_lenient_secrets.py`). Each test calls
the one place where its fact enters, so an example costs milliseconds: no training, no server.

- trust: hostile environment ids, import names and arguments recorded in an imported trace are
  never built, on every road out of `primenb.traces.trust` (and eval's reading of them);
- ``--api-key-var``: a name that is not a set, non-empty identifier is refused, and a value that
  is not a name (it may be the key itself) is never echoed;
- sampling values of eval (``--temperature``, ``--max-tokens``, parsed as the magic parses them)
  and of the server's requests (temperature, top_p, top_k, penalties, n, max_tokens, seed): out of
  range, non-finite, of the wrong type or huge is refused, in range is taken as given;
- reward return values: every value scores a finite number or an error text, in eval's scoring
  and in training's guard, and the eval summary and stored file never crash;
- deny: a generated marker in a reward's exception, a log record and a sample row never reaches
  the text under deny, and does without it (the control).
"""

from __future__ import annotations

import json
import logging
import math
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from primenb.errors import PrimenbError
from tests.adversarial.test_lenient_secrets import TOKENS

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)

# -- trust ---------------------------------------------------------------------------------------

_IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
ENV_IDS = st.one_of(
    st.sampled_from(
        ["subprocess:getoutput", "os:system", "builtins:exec", "pty:spawn", "shutil:rmtree", "importlib:import_module"]
    ),
    st.tuples(st.lists(_IDENT, min_size=1, max_size=3), _IDENT).map(lambda t: f"{'.'.join(t[0])}:{t[1]}"),
    st.lists(_IDENT, min_size=2, max_size=4).map(".".join),  # a dotted module path
    st.text(min_size=1, max_size=300),  # anything: unicode, newlines, NUL, ``../``, spaces
)
ARGS = st.one_of(
    st.just({"cmd": "touch MARKER"}),
    st.dictionaries(st.text(max_size=10), JSON, max_size=4),
)


@pytest.fixture(scope="module")
def known() -> set[str]:
    from primenb.envs.registry import known_ids

    return set(known_ids())


def _trace(tmp: Path, sources: Any, *, imported: bool = True) -> Any:
    from primenb.traces.trace import Trace

    doc: dict[str, Any] = {"trace_id": "0123456789ab", "name": "bundle", "data": {"train": {"sources": sources}}}
    if imported:
        doc["imported"] = {"from": "/elsewhere", "host": "other"}
    else:  # made here: the record the engine leaves when it starts a run in this folder
        from primenb.protocol.provenance import record_engine_run

        record_engine_run(tmp, doc["trace_id"])
    return Trace(doc, tmp)


@SETTINGS
@given(env_id=ENV_IDS, args=ARGS, template=st.one_of(st.none(), st.text(max_size=40), JSON))
def test_generated_hostile_sources_of_an_imported_trace_are_never_built(
    env_id: str, args: dict[str, Any], template: Any, known: set[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.envs import registry
    from primenb.serve import evaluate
    from primenb.traces import trust

    assume(env_id not in known)
    built: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(registry, "get_environment", lambda e, **kw: built.append((e, kw)))
    source = {"name": "x", "env_id": env_id, "args": args, "text_template": template}
    trace = _trace(tmp_path, [source])

    for verb in ("serve", "eval", "generate", "apply"):
        with pytest.raises(trust.UntrustedTrace, match="--trust") as err:
            trust.environment(env_id, args, trace=trace, verb=verb)
        assert len(str(err.value)) < 1500 and "touch MARKER" not in str(err.value)
        with pytest.raises(trust.UntrustedTrace):
            trust.check(trace, [env_id], verb)
    with pytest.raises(trust.UntrustedTrace):
        trust.recorded_args(trace, env_id, "eval")
    # eval reads the recorded arguments, then takes the same road with the trace they came from
    read, recorded_by = evaluate._env_args(env_id, {}, [trace])
    with pytest.raises(trust.UntrustedTrace):
        trust.environment(env_id, read, trace=recorded_by, verb="eval")
    # serve and generate: the recorded prompt format, as plain data, or none
    shown = trust.prompt_format(trace, "serve")
    assert shown is None or (shown == template and "{prompt}" in shown and len(shown) <= trust.MAX_TEMPLATE)
    assert built == []

    # control: the same source is built when trusted, or from a trace made here
    trust.environment(env_id, args, trace=trace, verb="eval", trust=True)
    trust.environment(env_id, args, trace=_trace(tmp_path, [source], imported=False), verb="eval")
    assert built == [(env_id, args), (env_id, args)]


SOURCE_LISTS = st.lists(
    st.one_of(JSON, st.fixed_dictionaries({"env_id": st.one_of(ENV_IDS, JSON), "args": st.one_of(ARGS, JSON)})),
    max_size=3,
)
DATA = st.one_of(
    JSON,
    st.dictionaries(
        st.sampled_from(["train", "eval", "x"]), st.one_of(JSON, st.fixed_dictionaries({"sources": SOURCE_LISTS}))
    ),
)


@SETTINGS
@given(data=DATA)
def test_any_recorded_data_section_is_read_without_error_and_never_built(
    data: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle's trace.json with any ``data`` section, read as every verb reads it."""
    from primenb.envs import registry
    from primenb.protocol.record import write_trace
    from primenb.traces import trust
    from primenb.traces.trace import Trace, TraceNotFound

    built: list[Any] = []
    monkeypatch.setattr(registry, "get_environment", lambda e, **kw: built.append(e))
    write_trace(tmp_path, {"trace_id": "0123456789ab", "imported": {"from": "x"}, "data": data})
    try:
        trace = Trace.load(tmp_path)
    except TraceNotFound:
        return  # not a trace at all (NaN is not JSON): nothing is read from it
    for src in trust.sources(trace, ("train", "eval")):
        assert isinstance(src["env_id"], str) and isinstance(src["args"], dict)
    trust.prompt_format(trace, "serve")
    assert [e for e in built if e not in registry.known_ids()] == []


# -- --api-key-var -------------------------------------------------------------------------------

KEY_VARS = st.one_of(
    TOKENS,  # a token pasted where its name belongs
    st.just(""),
    st.text(" \t\n\r\u00a0\u2003", min_size=1, max_size=5),  # whitespace only
    st.text(min_size=1, max_size=80),  # unicode, punctuation, control characters
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,80}", fullmatch=True),  # identifier-shaped, maybe too long
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True).map(lambda s: f" {s}"),
)


@SETTINGS
@given(name=KEY_VARS, value=st.sampled_from([None, "", "  ", "a-real-key-0123456789"]))
def test_generated_api_key_var_names_are_refused_unless_a_set_variable(
    name: str, value: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from primenb.protocol.hashing import has_credential
    from primenb.serve import registry
    from primenb.serve.client import check_key_var

    is_name = bool(registry.KEY_VAR_RE.match(name)) and len(name) <= 64 and not has_credential(name)
    if is_name:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        check_key_var(name)
    except PrimenbError as exc:
        message = str(exc)
        assert "--api-key-var" in message
        if not is_name:  # it may be the key itself: one fixed message, nothing of what was given
            assert "not shown" in message and message == _not_a_name_message()
        else:  # a name: it is said, with what to do
            assert "not set or is empty" in message and not (value or "").strip(), message
        return
    assert is_name and (value or "").strip(), (name, value)  # accepted: a name whose variable holds a key


def _not_a_name_message() -> str:
    from primenb.serve.client import check_key_var

    with pytest.raises(PrimenbError) as err:
        check_key_var("not a name")
    return str(err.value)


@SETTINGS
@given(token=TOKENS)
def test_a_token_given_as_the_key_variable_is_refused_and_never_echoed(token: str) -> None:
    from primenb.serve.client import check_key_var

    with pytest.raises(PrimenbError) as err:
        check_key_var(token)
    assert token not in str(err.value) and str(err.value) == _not_a_name_message()


# -- sampling values -----------------------------------------------------------------------------

NUMBERS = st.one_of(
    st.floats(),  # nan, inf, -inf, subnormals, huge
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, 2, -1, 0.0, 2.0, 2.0000001, -0.0, 1e-300, 1e308, 10**400]),
    st.booleans(),
)
FLOAT_TEXT = st.one_of(
    NUMBERS.map(str),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", "0x1p3", "1_0", " 1", "", "2.0e0"]),
    st.text(string.digits + ".eE+-_xX ", max_size=8),
)


def _eval_line(flag: str, text: str) -> str:
    import shlex

    return f"some-trace --env reverse-text {flag} {shlex.quote(text)}"


@SETTINGS
@given(text=FLOAT_TEXT, flag=st.sampled_from(["--temperature", "--max-tokens"]))
def test_generated_eval_sampling_values_are_refused_or_taken_as_given(
    text: str, flag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the magic and the CLI parse them, then as `evaluate` checks them: a value out of range,
    non-finite or not a number is an error naming the flag, before anything is found or started."""
    from primenb.notebook.args import magic_parser
    from primenb.serve import evaluate

    def reached(*_: Any) -> Any:
        raise _Reached  # past the value checks: where the eval would look for its models

    monkeypatch.setattr(evaluate, "_targets", reached)
    try:
        args = magic_parser("eval", "eval").parse_line(_eval_line(flag, text))
    except (PrimenbError, SystemExit) as exc:  # argparse: not a number at all
        assert flag in str(exc) or "argument" in str(exc), exc
        return
    t, k = args.temperature, args.max_tokens
    ok = (math.isfinite(t) and 0 <= t <= 2) if flag == "--temperature" else k >= 1
    try:
        evaluate.evaluate(["some-trace"], "reverse-text", temperature=args.temperature, max_tokens=args.max_tokens)
    except PrimenbError as exc:
        assert not ok and flag in str(exc), (text, exc)  # refused before anything, naming the flag
    except _Reached:
        assert ok, f"eval went on with {flag} {text!r}"


class _Reached(Exception):
    pass


# (field, smallest, largest, whole numbers only); None: no bound
SERVER_FIELDS = [
    ("temperature", 0, 2, False),
    ("top_p", 0, 1, False),
    ("presence_penalty", -2, 2, False),
    ("frequency_penalty", -2, 2, False),
    ("top_k", -1, None, True),
    ("n", 1, 128, True),
    ("max_tokens", 1, None, True),
    ("seed", None, None, True),
]


@SETTINGS
@given(
    field=st.sampled_from(SERVER_FIELDS),
    value=st.one_of(NUMBERS, st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2)),
    chat=st.booleans(),
)
def test_generated_request_sampling_values_are_refused_or_taken_as_given(
    field: tuple[str, Any, Any, bool], value: Any, chat: bool
) -> None:
    from pydantic import ValidationError

    from primenb.engine.serve_requests import SEED_MAX, SEED_MIN
    from primenb.serve.protocol import ChatRequest, CompletionRequest

    name, lo, hi, whole = field
    if name == "seed":
        lo, hi = SEED_MIN, SEED_MAX
    body: dict[str, Any] = {"model": "m", name: value}
    body.update({"messages": [{"role": "user", "content": "a"}]} if chat else {"prompt": "a"})
    number = (
        isinstance(value, (int, float)) and not isinstance(value, bool) and not (whole and isinstance(value, float))
    )
    ok = value is None or (
        number
        and (isinstance(value, int) or math.isfinite(value))
        and (lo is None or value >= lo)
        and (hi is None or value <= hi)
    )
    try:
        request = (ChatRequest if chat else CompletionRequest).model_validate(body)
        sampling = request.sampling()
    except (ValidationError, ValueError, PrimenbError) as exc:
        assert not ok, (body, exc)
        assert name in str(exc), exc  # the refusal names the field
        return
    assert ok, f"accepted silently: {body}"
    if value is not None and name not in ("max_tokens", "top_k"):
        assert getattr(sampling, name) == value
    if name == "max_tokens" and value is not None:
        assert sampling.max_tokens == value  # capped to the context left when the request is prepared


# -- reward return values ------------------------------------------------------------------------


class _FloatRaises:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def __float__(self) -> float:
        raise self.exc


class _FloatLies:
    def __float__(self) -> Any:
        return "1.0"  # not a float: float() itself raises TypeError


RETURNS = st.one_of(
    st.floats(),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.booleans(),
    st.none(),
    st.text(max_size=10),
    st.sampled_from(["1.5", "nan", "inf", "-1e999", "1e308", " 2 "]),
    st.sampled_from([ValueError("x"), OverflowError(), ZeroDivisionError(), RecursionError(), KeyError("k")]).map(
        _FloatRaises
    ),
    st.just(_FloatLies()),
    st.lists(st.floats(), max_size=2).map(tuple),
    st.dictionaries(st.text(max_size=3), st.floats(), max_size=2),
)


def _finite_or_error(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, float) and math.isfinite(value))


@SETTINGS
@given(
    values=st.lists(RETURNS, min_size=1, max_size=4),
    shape=st.sampled_from(["one", "list", "short", "scalar"]),
    weight=st.sampled_from([1.0, -1.0, 1e308]),
)
def test_generated_reward_values_score_finite_or_an_error_and_the_summary_never_crashes(
    values: list[Any], shape: str, weight: float
) -> None:
    from primenb.envs.base import Environment
    from primenb.envs.guard import guard, to_score
    from primenb.serve import eval_stats, evaluate

    def reward(prompts: list[Any], completions: list[Any], **_: Any) -> Any:
        value = values[len(calls) % len(values)]
        calls.append(value)
        return {"one": [value], "list": [value, value], "short": [], "scalar": value}[shape]

    calls: list[Any] = []
    rows = [{"prompt": f"p{i}", "answer": "a"} for i in range(len(values))]
    env = Environment(id="t", eval=rows, reward_funcs=[reward], reward_weights=[weight])
    per_func, totals = evaluate._score_all(env, rows, ["c"] * len(rows))
    assert all(isinstance(v, float) and math.isfinite(v) for v in per_func["reward"])
    assert all(isinstance(t, float) and math.isfinite(t) for t in totals)  # weighted terms clamped (issue 42)
    records = [{"example": i, "reward": t, "rewards": {}} for i, t in enumerate(totals)]
    eval_stats.interval(records)
    eval_stats.stdev(totals)
    doc = evaluate._finite({"summary": {"reward_mean": eval_stats.mean(totals)}, "samples": records})
    json.dumps(doc, allow_nan=False)  # the stored file is JSON

    # training's guard: the same values become finite scores (unscorable ones 0.0), never a raise
    for value in values:
        score = to_score(value)
        assert score is None or not isinstance(score, float) or math.isfinite(score)
        assert not (isinstance(value, str) and isinstance(score, float))  # "1.5" is text, not a score
    if shape == "one":
        scores = guard(reward, "t")(prompts=["p"], completions=["c"])
        assert len(scores) == 1 and (scores[0] is None or math.isfinite(scores[0]))


# -- deny ----------------------------------------------------------------------------------------

MARKERS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=4, max_size=40).map(
    lambda s: f"MK\u00a7{s}"
)  # a fixed head: it cannot be a piece of the fixed log text


def _forms(marker: str) -> list[str]:
    """The marker as it may be written: raw, repr'd, JSON-escaped, unicode-escaped."""
    return [marker, repr(marker)[1:-1], json.dumps(marker)[1:-1], marker.encode("unicode_escape").decode()]


@SETTINGS
@given(marker=MARKERS, deny=st.booleans())
def test_a_generated_marker_is_withheld_under_deny_and_shown_without_it(
    marker: str, deny: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from primenb.envs.base import Environment
    from primenb.envs.guard import guard
    from primenb.protocol.hashing import has_credential, redact_text
    from primenb.protocol.privacy import LogFilter, error_text, private_while, withhold_sample
    from primenb.serve import evaluate

    def raises(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        raise ValueError(f"cannot score {prompts[0]!r} -> {completions[0]!r}: {marker}")

    caplog.clear()
    caplog.set_level(logging.DEBUG)
    rows = [{"prompt": f"say {marker}", "answer": marker}]
    shown: list[str] = []
    with private_while(deny):
        shown.append(error_text(ValueError(marker)))
        evaluate._score_all(Environment(id="t", eval=rows, reward_funcs=[raises]), rows, [f"re {marker}"])
        guard(raises, "t")(prompts=[rows[0]["prompt"]], completions=[marker])
        try:
            raise RuntimeError(marker)
        except RuntimeError as exc:
            record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed: %s", (exc,), (type(exc), exc, None))
        LogFilter().filter(record)
        shown.append(record.getMessage() + str(record.exc_text or ""))
        shown.append(json.dumps(withhold_sample({"prompt": marker, "completion": marker, "answer": marker})))
    shown += [r.getMessage() + str(r.exc_text or "") + str(r.exc_info or "") for r in caplog.records]
    text = "\n".join(shown)
    if deny:
        assert not any(f in text for f in _forms(marker)), text
    elif not has_credential(marker):  # control: the same calls show it (a token-shaped one is redacted)
        assert any(f in text for f in _forms(redact_text(marker))), text
