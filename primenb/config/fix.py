"""`--fix`: rewrite legacy keys in the TOML text, keeping comments and layout, and show the diff."""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass

from primenb.config.loader import Outcome, validate
from primenb.protocol.fields import Mode


@dataclass
class Fix:
    before: str
    after: str
    outcome: Outcome  # validation of `after`

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                "before",
                "after (migrated)",
            )
        )

    def _repr_html_(self) -> str:
        if not self.changed:
            return "<div>Nothing to migrate: no legacy keys found.</div>"
        rows = []
        for line in self.diff().splitlines():
            color = {"+": "#e6ffec", "-": "#ffebe9", "@": "#ddf4ff"}.get(line[:1], "transparent")
            if line.startswith(("+++", "---")):
                color = "transparent"
            rows.append(f'<div style="background:{color}">{html.escape(line) or "&nbsp;"}</div>')
        return (
            '<div class="primenb-fix"><b>Migrated config</b> (legacy keys rewritten; '
            "a new cell below holds the result)"
            f'<pre style="font-size:90%;margin:4px 0">{"".join(rows)}</pre></div>'
        )

    def __repr__(self) -> str:
        return self.diff() if self.changed else "Nothing to migrate: no legacy keys found."


def fix_text(
    text: str, *, source: str = "<cell>", mode: Mode | None = None, first_line: int = 1, lenient: bool = False
) -> Fix:
    outcome = validate(text, source=source, mode=mode, first_line=first_line, lenient=lenient)
    migration = outcome.migration
    after = migration.edits.apply() if migration and migration.changed and migration.edits else text
    if after == text:
        return Fix(text, text, outcome)
    return Fix(text, after, validate(after, source=source, mode=mode, first_line=first_line, lenient=lenient))
