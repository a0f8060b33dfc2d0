"""The tables upstream hands to other libraries, checked with those libraries' own classes.

* `env` of every source: verifiers' `SingleAgentEnvConfig` (harness per id, runtime per type,
  timeouts, retries...), as prime-rl's `EnvConfig` narrows it. The taskset stands in as open
  when it names an id (its package defines its options; upstream's verdicts were made the same
  way), and is checked as verifiers' plain `TasksetConfig` when it names none.
* `renderer` (`orchestrator.renderer`, SFT `renderer`): the `renderers` package's union.

Unknown multi-agent role tables (`env.player`) and harness options an environment's own package
may define are warnings: without that package nobody here can tell. Where verifiers is not
installed, one info line says the environment tables were checked only structurally.
verifiers is imported once, lazily (it takes seconds); later checks reuse the classes.
"""

from __future__ import annotations

import copy
import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from primenb.config.diagnostics import format_path
from primenb.config.positions import Path
from primenb.protocol.fields import get_path

# the agent table every source gets when it names none (upstream's defaults)
_DEFAULT_AGENT = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}


@dataclass
class PluginProblem:
    path: Path
    severity: str
    message: str
    hint: str = ""
    code: str = "type"


@cache
def _verifiers() -> Any:
    """(SingleAgentEnvConfig, loaders) or None when verifiers is not installed."""
    try:
        from verifiers.v1.envs.single_agent.env import SingleAgentEnvConfig
        from verifiers.v1.utils import loaders
    except Exception:  # an optional extra: any import failure means "not here"
        return None
    return SingleAgentEnvConfig, loaders


@cache
def _renderer_adapter() -> Any:
    try:
        from pydantic import TypeAdapter
        from renderers.configs import RendererConfig
    except Exception:
        return None
    return TypeAdapter(RendererConfig)


def _sources(data: dict[str, Any], mode: str) -> Iterator[Path]:
    rl_roots: list[Path] = [("orchestrator", "train", "source"), ("orchestrator", "eval", "source")]
    roots = rl_roots if mode == "rl" else [("eval", "source")]
    for root in roots:
        sources = get_path(data, root)
        if isinstance(sources, list):
            for i, src in enumerate(sources):
                if isinstance(src, dict) and isinstance(src.get("env"), dict):
                    yield root + (i, "env")


def plugin_problems(data: dict[str, Any], mode: str) -> Iterator[PluginProblem]:
    """Problems in the env and renderer tables of schema-valid, propagated config data.

    Importing verifiers costs seconds (5-13 s for upstream's biggest config), so the verdict is
    kept per machine (`PRIME_HOME/cache/plugin-check/`), keyed by the exact tables checked and the
    versions of verifiers, renderers and primenb: the same tables under the same versions get the
    same verdict without the import. Anything else computes it (and stores it)."""
    tables = _checked_tables(data, mode)
    key = _cache_key(tables, mode)
    cached = _cache_read(key)
    if cached is not None:
        yield from cached
        return
    found = list(_plugin_problems(data, mode))
    _cache_write(key, found)
    yield from found


def _checked_tables(data: dict[str, Any], mode: str) -> dict[str, Any]:
    envs = {format_path(at): get_path(data, at) for at in _sources(data, mode)}
    renderers: list[Path] = [("orchestrator", "renderer"), ("orchestrator", "algo", "renderer")]
    shown = {format_path(at): get_path(data, at) for at in (renderers if mode == "rl" else [("renderer",)])}
    return {"envs": envs, "renderers": shown}


def _cache_key(tables: dict[str, Any], mode: str) -> str | None:
    from primenb.config import verdict_cache

    dists = verdict_cache.versions("primenb", "verifiers", "renderers")
    return verdict_cache.key("plugin-check", dists, _code_digest(), mode, tables)


@cache
def _code_digest() -> str:
    """This checker's own source: a verdict kept by another revision of it is not this one's
    (an editable install keeps its version number across edits)."""
    import hashlib
    from pathlib import Path as FsPath

    return hashlib.sha256(FsPath(__file__).read_bytes()).hexdigest()[:16]


def _cache_read(key: str | None) -> list[PluginProblem] | None:
    from primenb.config import verdict_cache

    rows = verdict_cache.read("plugin-check", key)
    try:
        return [PluginProblem(tuple(r["path"]), r["severity"], r["message"], r["hint"], r["code"]) for r in rows]
    except (KeyError, TypeError):
        return None  # absent or not this shape: compute it


def _cache_write(key: str | None, found: list[PluginProblem]) -> None:
    from primenb.config import verdict_cache

    rows = [
        {"path": list(q.path), "severity": q.severity, "message": q.message, "hint": q.hint, "code": q.code}
        for q in found
    ]
    verdict_cache.write("plugin-check", key, rows)


def _plugin_problems(data: dict[str, Any], mode: str) -> Iterator[PluginProblem]:
    envs = [(at, _to_check(get_path(data, at))) for at in _sources(data, mode)]
    if envs and not verifiers_installed():
        yield PluginProblem(
            envs[0][0],
            "info",
            "environment tables were checked only structurally (verifiers is not installed)",
            "pip install verifiers to check harness, runtime and agent options as prime-rl does",
            "env-structural",
        )
    elif any(env for _, env in envs):  # import verifiers (seconds) only when there is something to check
        vf = _verifiers()
        for at, env in envs:
            if env and vf is not None:
                single = isinstance(get_path(data, at + ("agent",)), dict)
                yield from _env_problems(vf, env, at, single)
    renderers: list[Path] = [("orchestrator", "renderer"), ("orchestrator", "algo", "renderer")]
    for at in renderers if mode == "rl" else [("renderer",)]:
        table = get_path(data, at)
        if isinstance(table, dict):
            yield from _renderer_problems(table, at)


def verifiers_installed() -> bool:
    """Cheap: whether verifiers could be imported, without importing it."""
    import importlib.util

    return importlib.util.find_spec("verifiers") is not None


def _to_check(env: dict[str, Any]) -> dict[str, Any]:
    """What verifiers' classes check of a source's env: the taskset's own package defines its
    options when it names an id, and the default agent is valid by definition."""
    data = copy.deepcopy(env)
    taskset = data.get("taskset")
    if isinstance(taskset, dict) and taskset.get("id"):
        del data["taskset"]
    if data.get("agent") == _DEFAULT_AGENT:
        del data["agent"]
    return data


def _env_problems(vf: Any, data: dict[str, Any], at: Path, single: bool = False) -> Iterator[PluginProblem]:
    config_cls, loaders = vf
    env_id = data.get("id")
    if env_id:
        try:
            config_cls = loaders.env_config_type("", env_id)
        except Exception:  # not installed here
            yield PluginProblem(
                at + ("id",),
                "warning",
                f"environment `{env_id}` is not installed here; its tables were checked only structurally",
                "",
                "unknown-env",
            )
            return
    from pydantic import ValidationError

    try:
        config_cls.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            yield _map_error(err, data, at, loaders, single)
    except Exception as exc:  # a plugin that does not import (harness id not installed)
        message = str(exc).split("\n")[0]
        harness = _harness_at(data)
        harness_id = (get_path(data, harness) or {}).get("id") if harness else None
        if harness and isinstance(harness_id, str) and not _installable(harness_id):
            yield PluginProblem(
                at + harness + ("id",),
                "error",
                f"harness id {_shown(harness_id)} cannot name a package, so no harness has it (prime-rl "
                "imports the id as a Python module)",
                "a harness id is a module name: letters, digits and underscores, no spaces or other characters",
                "value",
            )
            return
        yield PluginProblem(
            at + harness + ("id",) if harness else at,
            "warning",
            message,
            "install the package that provides it where the run starts",
            "unknown-env",
        )


def _installable(module: str) -> bool:
    """Whether a package could be installed under this import name: dotted Python identifiers,
    each short enough to be a file name (255 bytes)."""
    return all(part.isidentifier() and len(part.encode()) <= 255 for part in module.split("."))


def _shown(value: str) -> str:
    text = repr(value)
    return f"`{text[:60]}...`" if len(text) > 64 else f"`{text}`"


def _harness_at(data: dict[str, Any]) -> Path | None:
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(value.get("harness"), dict):
            return (key, "harness")
    return None


def _has(cur: Any, part: Any) -> bool:
    if isinstance(cur, dict):
        return isinstance(part, str) and part in cur
    return isinstance(cur, list) and isinstance(part, int) and part < len(cur)


def _loc_to_path(loc: tuple[Any, ...], data: Any) -> Path:
    """An error location on the data, with union tags (`runtime.prime.x`) dropped."""
    path: list[str | int] = []
    cur = data
    for i, part in enumerate(loc):
        if _has(cur, part):
            path.append(part)
            cur = cur[part]
        elif not isinstance(cur, (dict, list)):
            break
        elif i == len(loc) - 1 and isinstance(part, str):
            path.append(part)
    return tuple(path)


def _close(word: str, options: list[str]) -> str | None:
    found = difflib.get_close_matches(word, options, n=1, cutoff=0.75)
    return found[0] if found else None


def _map_error(err: Any, data: dict[str, Any], at: Path, loaders: Any, single: bool = False) -> PluginProblem:
    path = _loc_to_path(tuple(err["loc"]), data)
    kind = err["type"]
    where = format_path(at + path[:-1])
    if kind == "extra_forbidden" and path:
        key = str(path[-1])
        table = get_path(data, path[:-1])
        if len(path) == 1 and isinstance(data.get(key), dict):
            # env.<role>: a multi-agent env's seat, defined by the environment's package
            close = _close(key, ["agent", "taskset", "timeout", "retries", "interception", "id"])
            if close is None and not single:  # beside an `agent` seat it is a single-agent env
                return PluginProblem(
                    at + path,
                    "warning",
                    f"`{key}` is not a table of the single-agent environment; a multi-agent "
                    "environment's own package may define this role (not installed here)",
                    "install the environment package to check it",
                    "unknown-key",
                )
        harness = path[:-1]
        if len(harness) == 2 and harness[-1] == "harness" and isinstance(table, dict) and table.get("id"):
            # the harness's own config class rejects it, as upstream's loader does
            fields = _harness_fields(loaders, str(table["id"]))
            nested = next((f"{name}.{key}" for name, inner in fields if key in inner), None)
            close = nested or _close(key, [name for name, _ in fields])
            return PluginProblem(
                at + path,
                "error",
                f"unknown option `{key}` for harness `{table['id']}`",
                f"did you mean `{close}`?" if close else "its options: " + ", ".join(name for name, _ in fields),
                "unknown-key",
            )
        known = _fields_near(err, data)
        close = _close(key, known)
        return PluginProblem(
            at + path,
            "error",
            f"unknown key `{key}` in [{where}]",
            f"did you mean `{close}`?" if close else "",
            "unknown-key",
        )
    if kind == "missing":
        return PluginProblem(
            at + path, "error", f"missing required key `{path[-1]}` in [{where}]", f"add `{path[-1]} = ...`", "missing"
        )
    if kind == "union_tag_invalid":
        ctx = err.get("ctx") or {}
        return PluginProblem(
            at + path + ("type",) if isinstance(get_path(data, path), dict) else at + path,
            "error",
            f"unknown {str(ctx.get('discriminator', 'type')).strip(chr(39))} `{ctx.get('tag')}` "
            f"for [{format_path(at + path)}]",
            f"expected one of: {ctx.get('expected_tags', '')}",
        )
    message = err["msg"].removeprefix("Value error, ")
    return PluginProblem(at + path, "error", message, "", "value" if kind == "value_error" else "type")


def _harness_fields(loaders: Any, harness_id: str) -> list[tuple[str, list[str]]]:
    """The harness's options, each with the options of the table it holds (`compaction`)."""
    try:
        fields = loaders.harness_config_type(harness_id).model_fields
    except Exception:
        return [("id", [])]
    return [(name, _table_keys(field.annotation)) for name, field in fields.items()]


def _table_keys(annotation: Any) -> list[str]:
    from typing import get_args

    from pydantic import BaseModel

    for member in (annotation, *get_args(annotation)):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return list(member.model_fields)
    return []


def _fields_near(err: Any, data: dict[str, Any]) -> list[str]:
    """Sibling keys that exist in the data: a cheap source of "did you mean"."""
    parent = get_path(data, _loc_to_path(tuple(err["loc"])[:-1], data))
    return [k for k in parent if isinstance(k, str)] if isinstance(parent, dict) else []


def _renderer_problems(table: dict[str, Any], at: Path) -> Iterator[PluginProblem]:
    adapter = _renderer_adapter()
    if adapter is None:
        return
    from pydantic import ValidationError

    try:
        adapter.validate_python(table)
    except ValidationError as exc:
        for err in exc.errors():
            path = _loc_to_path(tuple(err["loc"]), table)
            if err["type"] == "union_tag_invalid":
                ctx = err.get("ctx") or {}
                tags = [t.strip(" '") for t in str(ctx.get("expected_tags", "")).split(",")]
                close = difflib.get_close_matches(str(ctx.get("tag")), tags, n=1)
                yield PluginProblem(
                    at + ("name",),
                    "error",
                    f"unknown renderer `{ctx.get('tag')}`",
                    f"did you mean `{close[0]}`?" if close else "renderers: " + ", ".join(tags),
                )
            elif err["type"] == "extra_forbidden":
                yield PluginProblem(
                    at + path,
                    "error",
                    f"unknown key `{path[-1]}` in [{format_path(at)}] for renderer `{table.get('name')}`",
                    "",
                    "unknown-key",
                )
            else:
                yield PluginProblem(at + path, "error", err["msg"].removeprefix("Value error, "))
