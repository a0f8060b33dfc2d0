"""Key-path edits of a TOML config (``--set trainer.optim.lr=1e-5``) and the validated result:
what `apply`, the config builder and the harness browser use to derive one config from another.
Comments and layout of untouched keys survive (tomlkit)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from primenb.config.tomlread import TOMLDecodeError, read_toml
from primenb.errors import PrimenbError

if TYPE_CHECKING:
    from primenb.config import Config
    from primenb.protocol.fields import Mode


_PART = re.compile(r"^([A-Za-z0-9_\-]+)(?:\[(\d+)\])?$")


def parse_value(raw: str) -> Any:
    """A ``--set`` value as TOML (``1e-4``, ``true``, ``"x"``, ``[1, 2]``), else a bare string."""
    try:
        return read_toml(f"v = {raw}")["v"]
    except TOMLDecodeError:
        return raw


def parse_overrides(items: Sequence[str]) -> list[tuple[str, Any]]:
    out = []
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise PrimenbError(f"--set takes key=value (e.g. optim.lr=1e-4), got {item!r}")
        out.append((key.strip(), parse_value(raw.strip())))
    return out


def set_key(doc: Any, path: str, value: Any) -> None:
    """Set a dotted TOML path (``a.b[0].c``) in a tomlkit document, creating tables as needed."""
    import tomlkit

    parts = path.split(".")
    node = doc
    for i, part in enumerate(parts):
        m = _PART.match(part)
        if not m:
            raise PrimenbError(f"--set: {path!r} is not a key path like trainer.optim.lr or source[0].name")
        key, idx = m.group(1), m.group(2)
        last = i == len(parts) - 1
        if idx is not None:
            seq = node.get(key)
            if seq is None or int(idx) >= len(seq):
                raise PrimenbError(f"--set {path}: {key} has no entry [{idx}]")
            if last:
                seq[int(idx)] = value
                return
            node = seq[int(idx)]
            continue
        if last:
            node[key] = value
            return
        if key not in node:
            node[key] = tomlkit.table()
        node = node[key]


def remove_key(doc: Any, path: str) -> None:
    parts = path.split(".")
    node = doc
    for part in parts[:-1]:
        if part not in node:
            return
        node = node[part]
    if parts[-1] in node:
        del node[parts[-1]]


def edited_config(text: str, overrides: Sequence[tuple[str, Any]], *, mode: Mode | None = None) -> Config:
    """The config ``text`` with ``overrides`` applied, validated (raises with every problem)."""
    import tomlkit

    from primenb.config import ConfigError, load_config

    doc = tomlkit.parse(text)
    remove_key(doc, "run.dir")  # a new run needs its own directory
    for key, value in overrides:
        set_key(doc, key, value)
    new_text = tomlkit.dumps(doc)
    try:
        return load_config(new_text, mode=mode)
    except ConfigError as exc:
        report = _blame_overrides(exc.report, overrides)
        raise PrimenbError(_invalid_text(report)) from None


def _invalid_text(report: Any) -> str:
    """The report under one header: "the new run's config" once, not before every line."""
    prefix = f"{report.source}:"
    lines = report.to_text().splitlines()[:-1]  # the last line is the summary: the header has it
    body = [
        (
            "line " + line.removeprefix(prefix)
            if line[len(prefix) : len(prefix) + 1].isdigit()
            else line.removeprefix(prefix + " ")
        )
        if line.startswith(prefix)
        else line
        for line in lines
    ]
    counts = report.summary().removeprefix(f"{report.source}: ")
    return f"the new run's config is not valid ({counts}):\n" + "\n".join(body)


def _blame_overrides(report: Any, overrides: Sequence[tuple[str, Any]]) -> Any:
    """The report with each problem of an overridden key put on the override that set it: its line
    in the derived TOML is nothing the user wrote (it read "<cell>:21:6" and quoted the parent's
    config). Other problems keep their line, in "the new run's config"."""
    import dataclasses
    import json

    def given(path: str) -> tuple[str, Any] | None:
        for key, value in overrides:
            if path == key or path.startswith((f"{key}.", f"{key}[")):
                return key, value
        return None

    diagnostics = []
    for d in report.diagnostics:
        hit = given(d.path)
        if hit is not None:
            key, value = hit
            shown = json.dumps(value) if isinstance(value, str) else str(value)
            d = dataclasses.replace(
                d, message=f"the override {key}={shown}: {d.message}", line=None, col=None, end_col=None
            )
        diagnostics.append(d)
    return dataclasses.replace(report, diagnostics=diagnostics, source="the new run's config")


__all__ = ["edited_config", "parse_overrides", "parse_value", "remove_key", "set_key"]
