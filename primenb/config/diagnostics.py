"""Diagnostics: every problem in a config, located in its text, rendered for HTML and terminals."""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field

from primenb.config.positions import Path


def format_path(path: Path) -> str:
    """`("orchestrator", "train", "source", 0, "name")` -> `orchestrator.train.source[0].name`."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


@dataclass
class Diagnostic:
    severity: str  # "error" | "warning" | "info"
    code: str  # syntax | unknown-key | missing | type | value | rule | conflict | legacy | secret
    path: str
    message: str
    hint: str = ""
    line: int | None = None  # in the editor's numbering: see `Report.first_line`
    col: int | None = None
    end_col: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


@dataclass
class Report:
    """All diagnostics for one config text."""

    diagnostics: list[Diagnostic]
    source: str = "<cell>"
    lines: list[str] = field(default_factory=list)
    # the editor's number of the text's first line: 1 for a file; 2 for a `%%rltoml` cell, whose
    # line 1 is the magic itself. Diagnostic lines are in the editor's numbering.
    first_line: int = 1
    # the order the checks met them: TOML, then the schema, then the rules (upstream's stages)
    found: list[Diagnostic] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.found = list(self.diagnostics)
        # listed in the order of the text (a cell listed line 8's error before line 6's): by line,
        # then column; diagnostics without a line (a missing table) after them, in the order found
        self.diagnostics = sorted(self.diagnostics, key=lambda d: (d.line is None, d.line or 0, d.col or 0))

    def quoted(self, d: Diagnostic) -> str | None:
        """The source line a diagnostic points at, or None when it points at none."""
        i = (d.line or 0) - self.first_line
        return self.lines[i] if d.line and 0 <= i < len(self.lines) else None

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def first_found_error(self) -> Diagnostic | None:
        """The first error the checks met (what upstream, which stops at its first failing stage,
        would report first), whatever line it is on."""
        return next((d for d in [*self.found, *self.diagnostics] if d.is_error), None)

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> str:
        return json.dumps(
            {"source": self.source, "ok": self.ok, "diagnostics": [asdict(d) for d in self.diagnostics]},
            indent=2,
        )

    def summary(self) -> str:
        e, w = len(self.errors), len(self.warnings)
        parts = [f"{e} error{'s' * (e != 1)}"] + ([f"{w} warning{'s' * (w != 1)}"] if w else [])
        return f"{self.source}: " + ", ".join(parts)

    def to_text(self) -> str:
        out = []
        for d in self.diagnostics:
            where = f"{self.source}:{d.line}:{d.col}" if d.line else self.source
            out.append(f"{where}: {d.severity}: {d.path or '(top level)'}: {d.message}")
            text = self.quoted(d)
            if text is not None:
                out.append(f"  {d.line:>4} | {text}")
                start = (d.col or 1) - 1
                width = max(1, (d.end_col or d.col or 1) - (d.col or 1))
                out.append("       | " + " " * start + "^" * width)
            if d.hint:
                out.append(f"       = hint: {d.hint}")
        out.append(self.summary())
        return "\n".join(out)

    __str__ = to_text

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        items = []
        for d in self.diagnostics:
            color = "#c62828" if d.is_error else "#b26a00"
            where = f"line {d.line}" if d.line else "config"
            quote = ""
            text = self.quoted(d)
            if text is not None:
                start = (d.col or 1) - 1
                end = max(start + 1, (d.end_col or d.col or 1) - 1)
                marked = (
                    html.escape(text[:start])
                    + f'<mark style="background:{color}22;border-bottom:2px solid {color}">'
                    + html.escape(text[start:end] or " ")
                    + "</mark>"
                    + html.escape(text[end:])
                )
                quote = (
                    '<pre style="margin:2px 0 2px 1.5em;padding:2px 6px;background:#f6f8fa">'
                    f'<span style="color:#888">{d.line:>4} │ </span>{marked}</pre>'
                )
            hint = f'<div style="margin-left:1.5em;color:#555">hint: {html.escape(d.hint)}</div>' if d.hint else ""
            items.append(
                f'<li style="margin:4px 0"><b style="color:{color}">{d.severity}</b> '
                f"<code>{html.escape(d.path or '(top level)')}</code> "
                f'<span style="color:#888">({where})</span>: {html.escape(d.message)}{quote}{hint}</li>'
            )
        return (
            '<div class="primenb-diagnostics">'
            f"<div><b>{html.escape(self.summary())}</b></div>"
            f'<ul style="list-style:none;padding-left:0.5em;margin:4px 0">{"".join(items)}</ul></div>'
        )
