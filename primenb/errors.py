"""Errors a user can cause. Magics and the CLI show them as messages, never as tracebacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from primenb.config.diagnostics import Report


class PrimenbError(Exception):
    """An error with a message that says what to do next."""


class ConfigError(PrimenbError):
    """A config failed validation; `report` holds every diagnostic found."""

    def __init__(self, report: Report) -> None:
        self.report = report
        super().__init__(report.to_text())

    def _repr_html_(self) -> str:
        return self.report._repr_html_()
