"""The config language: prime-rl `rl.toml` / `sft.toml`, validated with located diagnostics."""

from __future__ import annotations

from pathlib import Path

from primenb.config.diagnostics import Diagnostic, Report
from primenb.config.loader import Outcome, read_source, validate
from primenb.config.model import Config
from primenb.config.tomlread import TOMLDecodeError, read_toml
from primenb.errors import ConfigError
from primenb.protocol.fields import Mode

__all__ = ["Config", "ConfigError", "Diagnostic", "Report", "TOMLDecodeError", "check", "load_config", "read_toml"]


def check(source: str | Path, *, mode: Mode | None = None, first_line: int = 1, lenient: bool = False) -> Outcome:
    """Validate TOML text or a path; never raises for config problems. ``first_line``: the
    editor's number of the text's first line (2 in a `%%rltoml` cell), for diagnostics.
    ``lenient``: unknown keys are warnings (as `[primenb] lenient = true`)."""
    text, name = read_source(source)
    return validate(text, source=name, mode=mode, first_line=first_line, lenient=lenient)


def load_config(source: str | Path, *, mode: Mode | None = None, lenient: bool = False) -> Config:
    """Validate TOML text or a path and return a `Config`, or raise `ConfigError` with every problem."""
    outcome = check(source, mode=mode, lenient=lenient)
    if outcome.model is None:
        raise ConfigError(outcome.report)
    text, _ = read_source(source)
    return Config(outcome.model, mode=outcome.mode, text=text, report=outcome.report)
