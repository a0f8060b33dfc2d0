"""The validation pipeline: parse (positions kept) -> migrate -> schema -> propagate -> rules."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, replace
from pathlib import Path as FsPath
from typing import Any

from pydantic import BaseModel, ValidationError

from primenb.config.backend_rules import rules_for
from primenb.config.credentials import credentials
from primenb.config.diagnostics import Diagnostic, Report, format_path
from primenb.config.limits import local_limits, value_problems
from primenb.config.locate import located as _at  # also used by the platform rules (backends/hosted_rules.py)
from primenb.config.locate import value_end as _value_end
from primenb.config.migrate import Migration, migrate
from primenb.config.positions import Path, Positions, scan
from primenb.config.propagate import Propagated, propagate_rl, propagate_sft
from primenb.config.rules import RL_CHECKS, SFT_CHECKS, rl_rules, sft_rules
from primenb.config.salvage import run_checks, salvage
from primenb.config.schema import RLConfig, SFTConfig
from primenb.config.schema.common import SANITY
from primenb.config.schema_walk import keys_at, loc_to_path
from primenb.config.synonyms import suggest
from primenb.config.tomlread import TOMLDecodeError, read_toml
from primenb.protocol.fields import DEFAULT_BACKEND, MISSING, Mode, detect_mode, lookup

# a key right before `=`; the lookbehind starts a match only at a word's first character, so a
# 5 MB line is scanned once (without it every position restarted the scan: quadratic)
_KEY_BEFORE_EQ = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]+)[\"']?[ \t]*=")
_TOML_POS = re.compile(r"\(at line (\d+), column (\d+)\)")
_TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "string": "a string",
    "list": "an array",
    "dict": "a table",
    "model": "a table",
}


@dataclass
class Outcome:
    """What validating one text produced: a model when it is valid, and every diagnostic."""

    report: Report
    mode: Mode
    model: RLConfig | SFTConfig | None
    raw: dict[str, Any] | None
    migration: Migration | None


def read_source(source: str | FsPath) -> tuple[str, str]:
    """(text, name) for a TOML text or a path to one; a file that is not UTF-8 text is a message."""
    from primenb.errors import PrimenbError

    if isinstance(source, FsPath) or ("\n" not in source and source.endswith(".toml")):
        path = FsPath(source)
        if not path.is_file():
            raise PrimenbError(f"config file not found: {path} (pass TOML text or an existing .toml path)")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise PrimenbError(
                f"cannot read the config file {path}: {exc.strerror or exc} (check the file's permissions: chmod u+r)"
            ) from None
        return decode_toml(data, str(path)), str(path)
    return source, "<cell>"


def decode_toml(data: bytes, name: str) -> str:
    """TOML files are UTF-8 (the spec, and upstream's tomli): anything else gets a clear message."""
    from primenb.errors import PrimenbError

    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise PrimenbError(f"{name} is saved as UTF-16; TOML files must be UTF-8 (re-save it as UTF-8)")
    if b"\x00" in data:
        raise PrimenbError(f"{name} is a binary file (it holds NUL bytes), not TOML text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PrimenbError(
            f"{name} is not UTF-8 text (byte {exc.start}, line {line}); TOML files must be UTF-8 (re-save it as UTF-8)"
        ) from None


def validate(
    text: str, *, source: str = "<cell>", mode: Mode | None = None, first_line: int = 1, lenient: bool = False
) -> Outcome:
    """Every diagnostic of ``text``; never raises for anything in the text. ``first_line`` is the
    editor's number of the text's first line (2 in a `%%rltoml` cell): diagnostics use it.
    ``lenient`` (or `[primenb] lenient = true`): a key upstream does not know is a located
    warning, not an error, and is left out of the validated model (forward compatibility)."""
    try:
        return _validate(text, source=source, mode=mode, first_line=first_line, lenient=lenient)
    except RecursionError:  # `a = [[[[...]]]]` thousands deep: tomli and pydantic recurse
        d = Diagnostic(
            "error",
            "syntax",
            "",
            "the document is nested too deeply to read",
            "flatten the nested arrays or inline tables",
            None,
            None,
            None,
        )
        return Outcome(Report([d], source, text.splitlines(), first_line), mode or "rl", None, None, None)


def _is_lenient(raw: dict[str, Any]) -> bool:
    own = raw.get("primenb")
    return isinstance(own, dict) and own.get("lenient") is True


def _drop_unknown(root: type[BaseModel], data: dict[str, Any]) -> list[Path]:
    """Remove, in place, every key the schema calls unknown; the removed paths."""
    removed: list[Path] = []
    for _ in range(8):  # a removed key can unmask another in a union member: a few rounds
        try:
            root.model_validate(data)
            return removed
        except ValidationError as exc:
            found = [loc_to_path(e["loc"], data) for e in exc.errors() if e["type"] == "extra_forbidden"]
        found = [p for p in found if p and p not in removed]
        if not found:
            return removed
        for path in found:
            parent: Any = data
            for part in path[:-1]:
                parent = parent[part]
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
            removed.append(path)
    return removed


def _validate(text: str, *, source: str, mode: Mode | None, first_line: int, lenient: bool = False) -> Outcome:
    lines = text.splitlines()
    try:
        raw = read_toml(text)
    except TOMLDecodeError as exc:
        syntax = _in_editor([_syntax(exc, lines)], first_line)
        return Outcome(Report(syntax, source, lines, first_line), mode or "rl", None, None, None)

    pos = scan(text)
    # the secret rule first, on the text as written: no mode, migration or lenient drop lowers it
    found = [_at(pos, {}, p.path, "error", p.code, p.message, p.hint) for p in credentials(raw)]
    for v in value_problems(raw):  # any key: 2**64, inf (upstream takes them: warnings)
        if v.code != "secret":
            found.append(_at(pos, {}, v.path, v.severity, v.code, v.message, v.hint, on_value=True))
    chosen = mode
    mode = mode or detect_mode(raw)
    migration = migrate(raw, pos, mode)
    diagnostics = list(migration.diagnostics) + found
    if chosen is None:
        diagnostics += _mode_note(raw, mode, pos)
    if migration.hosted_shape:
        shown = _in_editor(diagnostics, first_line)
        return Outcome(Report(shown, source, lines, first_line), "rl", None, raw, migration)
    data = migration.data
    root: type[RLConfig] | type[SFTConfig] = SFTConfig if mode == "sft" else RLConfig

    lenient = lenient or _is_lenient(raw)
    if lenient:
        for path in _drop_unknown(root, data):
            diagnostics.append(
                _at(
                    pos,
                    migration.origins,
                    path,
                    "warning",
                    "unknown-key",
                    f"unknown key `{path[-1]}` (prime-rl 0.4.0 does not know it; lenient: passed through)",
                    "fine for a platform running a newer prime-rl; the local engine ignores it",
                )
            )
    try:
        root.model_validate(data)
        invalid: ValidationError | None = None
    except ValidationError as exc:
        invalid = exc
    schema_errors = _schema_errors(invalid, root, data, pos, migration.origins) if invalid else []
    diagnostics += schema_errors
    if invalid is not None:  # the cross-field rules still run on the parts that are valid
        diagnostics += _salvaged(root, mode, data, invalid, pos, migration.origins, first_line)
    else:
        diagnostics += _sanity(root, data, pos, migration.origins)
    model: RLConfig | SFTConfig | None = None
    if not schema_errors:
        prop = propagate_sft(data) if mode == "sft" else propagate_rl(data)
        origins = {**migration.origins, **prop.origins}
        diagnostics += _conflicts(prop, pos, origins, first_line)
        try:
            model = root.model_validate(prop.data)
        except ValidationError as exc:  # a propagated value the sub-config rejects
            diagnostics += _schema_errors(exc, root, prop.data, pos, origins)
        if model is not None:
            rules = sft_rules(model) if isinstance(model, SFTConfig) else rl_rules(model)
            from primenb.config.vfcheck import plugin_problems  # verifiers / renderers classes, lazily

            plugged = list(plugin_problems(prop.data, mode))
            broken = [q.path for q in plugged if q.severity == "error"]
            for p in rules:
                if p.code == "no-env" and any(b[: len(p.path) - 2] == p.path[:-2] for b in broken):
                    continue  # upstream stops at the env's own errors and never asks for an id
                diagnostics.append(_at(pos, origins, p.path, p.severity, p.code, p.message, p.hint))
            for q in plugged:
                severity = "warning" if lenient and q.code == "unknown-key" else q.severity
                diagnostics.append(_at(pos, origins, q.path, severity, q.code, q.message, q.hint))
            backend = (data.get("primenb") or {}).get("backend") if isinstance(data, dict) else None
            limits = list(local_limits(model, mode, rules_for(backend or DEFAULT_BACKEND).refuses_local_limits))
            for lim in limits:
                written = lim.path if lim.path in pos.spans else origins.get(lim.path, lim.path)
                diagnostics.append(
                    _at(pos, origins, written, "warning", lim.code, lim.message, lim.hint, on_value=True)
                )
            limited = {format_path(lim.path) for lim in limits} | {
                format_path(origins.get(lim.path, lim.path)) for lim in limits
            }
            diagnostics = [  # one warning per place: the engine's own limit says most
                d
                for d in diagnostics
                if not (
                    d.severity == "warning"
                    and (not d.code.startswith("local-") or d in found)
                    and _same_place(d, limited, origins)
                )
            ]
            from primenb.config.envcheck import env_problems  # environment ids (no heavy imports)

            for e in env_problems(model, mode):
                diagnostics.append(
                    _at(pos, origins, e.path, e.severity, e.code, e.message, e.hint, on_value=e.path[-1] == "id")
                )
    if model is not None:
        platform = rules_for((raw.get("primenb") or {}).get("backend")).platform  # its rules, in place
        diagnostics += platform(text, mode, source=source).diagnostics if platform else []
    # upstream's field errors first (its model validators never run on a config they fail), each
    # group in the text's order
    field_errors = bool(schema_errors) or bool(migration.diagnostics)
    # the mode note first: every other message reads in its light
    diagnostics.sort(
        key=lambda d: (d.code != "mode", field_errors and d.code in ("rule", "conflict"), d.line or 0, d.col or 0)
    )
    shown_lines = _redacted(lines, diagnostics)
    report = Report(_in_editor(diagnostics, first_line), source, shown_lines, first_line)
    if not report.ok:
        model = None
    return Outcome(report, mode, model, raw, migration)


# top-level tables only one mode has (RLConfig's and SFTConfig's own fields)
_RL_ONLY = ("trainer", "orchestrator", "rollout_transport")
_SFT_ONLY = ("data", "optim", "scheduler", "eval", "val", "renderer", "gc", "heartbeat", "trace_path")


def _mode_note(raw: dict[str, Any], mode: Mode, pos: Positions) -> list[Diagnostic]:
    """When a config holds tables of both modes, say which mode it was read as and why, at the
    first table of the other mode (a stray [orchestrator] in an SFT config reads as RL)."""
    rl = [k for k in _RL_ONLY if k in raw]
    sft = [k for k in _SFT_ONLY if k in raw]
    if not rl or not sft:
        return []
    other, flag = (sft, "--sft") if mode == "rl" else (rl, "--rl")
    why = f"it has [{rl[0]}]" if mode == "rl" else "it has [data] and no [trainer] or [orchestrator]"
    d = _at(
        pos,
        {},
        (other[0],),
        "info",
        "mode",
        f"read as an {mode.upper()} config because {why}; "
        + ", ".join(f"[{k}]" for k in other)
        + f" belong{'s' if len(other) == 1 else ''} to {'SFT' if mode == 'rl' else 'RL'} configs",
        f"if this is an {'SFT' if mode == 'rl' else 'RL'} config, remove "
        + ", ".join(f"[{k}]" for k in (rl if mode == "rl" else sft))
        + f" or pass {flag} (`primenb validate {flag}`, `%%rltoml NAME {flag}`)",
    )
    return [d]


def _same_place(d: Diagnostic, limited: set[str], origins: dict[Path, Path]) -> bool:
    """A sanity warning about a value a local-limit diagnostic already names (`max_steps = -5`)."""
    if d.path in limited:
        return True
    return any(format_path(origins.get(tuple(_path_of(p)), ())) == d.path for p in limited)


def _path_of(dotted: str) -> list[str | int]:
    out: list[str | int] = []
    for piece in re.findall(r"\[(\d+)\]|([^.\[\]]+)", dotted):
        out.append(int(piece[0]) if piece[0] else piece[1])
    return out


def _syntax(exc: TOMLDecodeError, lines: list[str]) -> Diagnostic:
    msg = str(exc)
    m = _TOML_POS.search(msg)
    line, col = (int(m.group(1)), int(m.group(2))) if m else (None, None)
    message = _TOML_POS.sub("", msg).strip().rstrip(".")
    hint = "check quotes, brackets and `key = value` syntax on this line"
    if lines and lines[0].startswith("\ufeff") and line == 1:
        hint = "the text starts with a byte-order mark (BOM); save the file as UTF-8 without a BOM"
    elif "Cannot overwrite a value" in msg or "Cannot declare" in msg:
        hint = "this key or table is defined twice; keep one"
    elif "Invalid value" in msg:
        hint = 'strings need quotes ("..."), booleans are lowercase true/false'
    elif "Expected '=' after a key" in msg:
        hint = "every line in a table must read `key = value`"
    return Diagnostic("error", "syntax", "", f"TOML syntax error: {message}", hint, line, col, (col or 0) + 1)


def _salvaged(
    root: type[BaseModel],
    mode: Mode,
    data: dict[str, Any],
    invalid: ValidationError,
    pos: Positions,
    origins: dict[Path, Path],
    first_line: int,
) -> list[Diagnostic]:
    """Sanity warnings, shared-value conflicts, cross-field rules and environment ids on what is
    valid in a config with schema errors (`primenb.config.salvage`): every problem at once."""
    saved = salvage(root, mode, data, invalid)
    if saved is None:
        return []
    out = _sanity(root, saved.cleaned, pos, origins)  # warnings about the valid parts
    origins = {**origins, **saved.propagated.origins}
    out += _conflicts(saved.propagated, pos, origins, first_line)
    for p in run_checks(SFT_CHECKS if mode == "sft" else RL_CHECKS, saved.view):
        if p.code == "no-env" and any(u[: len(p.path) - 2] == p.path[:-2] for u in saved.unusable):
            continue  # the env table has its own errors; upstream reports those, not a missing id
        out.append(_at(pos, origins, p.path, p.severity, p.code, p.message, p.hint))
    from primenb.config.envcheck import env_problems  # environment ids (no heavy imports)

    for e in run_checks([lambda c: env_problems(c, mode)], saved.view):
        out.append(_at(pos, origins, e.path, e.severity, e.code, e.message, e.hint, on_value=e.path[-1] == "id"))
    return out


def _sanity(root: type[BaseModel], data: dict[str, Any], pos: Positions, origins: dict[Path, Path]) -> list[Diagnostic]:
    """What upstream accepts but is almost surely a mistake: a value it coerces ("20", true for
    a number) or a bound it does not check (max_steps = 0). Warnings, located like errors."""
    try:
        root.model_validate(data, strict=True, context=SANITY)
    except ValidationError as exc:
        out = _schema_errors(exc, root, data, pos, origins)
        for d in out:
            d.severity = "warning"
            d.message += " (prime-rl accepts it)" if d.code == "type" else ""
        return out
    return []


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f'the string "{value}"'
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return repr(value)


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else ""


def _schema_errors(
    exc: ValidationError, root: type[BaseModel], data: dict[str, Any], pos: Positions, origins: dict[Path, Path]
) -> list[Diagnostic]:
    out = []
    errors = exc.errors()
    paths = [_validator_place(loc_to_path(e["loc"], data), e["type"], data) for e in errors]
    for n, err in enumerate(errors):
        path = paths[n]
        kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
        if (
            kind == "literal_error"
            and isinstance(value, dict)
            and any(p[: len(path)] == path and m != n for m, p in enumerate(paths))
        ):
            continue  # a table where a word or a table may go: the table member's errors say it
        table = format_path(path[:-1])
        where = f"[{table}]" if table else "the top level"
        on_value = True
        if kind == "extra_forbidden":
            key = str(path[-1])
            message = f"unknown key `{key}` in {where}"
            mode: Mode = "sft" if issubclass(root, SFTConfig) else "rl"
            suggestion = suggest(root, mode, path[:-1], key, value, data, written=_written(pos, path))
            options = keys_at(root, path[:-1], data)
            hint = (
                suggestion.hint
                if suggestion
                else "keys allowed here: " + ", ".join(options[:12]) + (", ..." if len(options) > 12 else "")
            )
            on_value = False
        elif kind == "missing":
            message = f"missing required key `{path[-1]}` in {where}"
            hint = f"add `{path[-1]} = ...` to {where}"
            on_value = False
        elif kind == "union_tag_invalid":
            tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
            tag = ctx.get("tag")
            if isinstance(value, dict) and "type" in value:
                path = path + ("type",)
            message = f"unknown type `{tag}` for [{format_path(path[:-1] if path[-1:] == ('type',) else path)}]"
            hint = _suggest(str(tag), tags) or "expected one of: " + ", ".join(tags)
        elif kind in ("union_tag_not_found", "missing_discriminator"):
            key = str(ctx.get("discriminator", "type")).strip("'")
            message = f"[{format_path(path)}] needs `{key}` to say which kind it is"
            hint = f"add `{key} = ...`"
            path = path + (key,)
            on_value = False
        elif kind == "literal_error":
            expected = str(ctx.get("expected", ""))
            message = f"{_describe(value)} is not allowed here; expected {expected}"
            hint = _suggest(str(value), re.findall(r"'([^']*)'", expected))
        elif kind.split("_")[0] in _TYPE_WORDS and kind.endswith(("_type", "_parsing", "_from_float")):
            want = _TYPE_WORDS[kind.split("_")[0]]
            message = f"expected {want}, got {_describe(value)}"
            hint = _type_hint(kind, value)
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            op = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}[kind]
            bound = next(iter(ctx.values()), "")
            message = f"must be {op} {bound}, got {value}"
            hint = ""
        else:
            message, hint = err["msg"].removeprefix("Value error, "), ""
        d = _at(
            pos,
            origins,
            path,
            "error",
            "unknown-key" if kind == "extra_forbidden" else ("missing" if kind == "missing" else "type"),
            message,
            hint,
            on_value=on_value,
        )
        out.append(d)
    return out


def _validator_place(path: Path, kind: str, data: dict[str, Any]) -> Path:
    """A model validator's error names its table; a last part the data lacks is the union
    member's tag (`orchestrator.algo.sft`), not a key."""
    if kind == "value_error" and path and lookup(data, path) is MISSING:
        return path[:-1]
    return path


def _type_hint(kind: str, value: Any) -> str:
    if kind.startswith(("int", "float")) and isinstance(value, str):
        return "write the number without quotes"
    if kind.startswith("bool"):
        return "TOML booleans are lowercase and unquoted: true / false"
    if kind.startswith(("dict", "model")):
        return "write it as a [table] header with keys under it"
    if kind.startswith("string"):
        return 'put the value in double quotes: "..."'
    if kind.startswith("list"):
        return "write an array: [ ... ]"
    return ""


def _in_editor(diagnostics: list[Diagnostic], first_line: int) -> list[Diagnostic]:
    """Diagnostics renumbered from the text's lines to the editor's (see `Report.first_line`)."""
    shift = first_line - 1
    return [replace(d, line=d.line + shift) if d.line and shift else d for d in diagnostics]


def _conflicts(prop: Propagated, pos: Positions, origins: dict[Path, Path], first_line: int) -> list[Diagnostic]:
    out = []
    for c in prop.conflicts:
        shared_line = pos.spans.get(c.shared)
        at = f" (line {shared_line.line + first_line - 1})" if shared_line else ""
        out.append(
            _at(
                pos,
                origins,
                c.path,
                "error",
                "conflict",
                f"`{format_path(c.path)}` = {c.value!r} disagrees with the shared "
                f"`{format_path(c.shared)}` = {c.shared_value!r}{at}",
                f"remove `{format_path(c.path)}` (the shared value fills it) or make them equal",
                on_value=True,
            )
        )
    for r in prop.replaced:
        out.append(
            _at(
                pos,
                origins,
                r.path,
                "warning",
                "conflict",
                f"[{format_path(r.path)}] is replaced by the shared [{format_path(r.shared)}]: prime-rl sets every "
                "component's table from it",
                f"drop [{format_path(r.path)}], or set the shared [{format_path(r.shared)}] to what you want",
            )
        )
    return out


def _written(pos: Positions, path: Path) -> str | None:
    """The value at ``path`` as the text spells it, when it fits on its key's line."""
    span = pos.spans.get(path)
    if span is None or span.value_col is None:
        return None
    text = pos.lines[span.line - 1]
    value = text[span.value_col - 1 : _value_end(text, span.value_col) - 1].strip()
    return value if value and value[-1] not in "[{" and not value.startswith(('"""', "'''")) else None


def _redacted(lines: list[str], diagnostics: list[Diagnostic]) -> list[str]:
    """Source lines for display, with the values on secret-looking lines masked."""
    from primenb.protocol.hashing import is_secret_name

    out = list(lines)
    for d in diagnostics:
        if not d.line or not 0 < d.line <= len(out):
            continue
        text = out[d.line - 1]
        eq = text.find("=")
        secret = d.code == "secret"  # a credential under any key (a URL's password, a flag's value)
        if eq >= 0 and (secret or any(is_secret_name(k) for k in _KEY_BEFORE_EQ.findall(text))):
            out[d.line - 1] = text[: eq + 1] + ' "****"'
            if d.col and d.col > eq:
                d.col, d.end_col = eq + 3, eq + 9
        elif secret:  # an element line of a multi-line array
            indent = len(text) - len(text.lstrip())
            out[d.line - 1] = text[:indent] + '"****"'
            d.col, d.end_col = indent + 1, indent + 7
    return out
