"""Line-level edits of a TOML text that keep every untouched byte (comments, layout) as it was."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TextEdits:
    lines: list[str]
    # (line index 0-based, order, kind, payload); applied bottom-up so indices stay valid.
    _ops: list[tuple[int, int, str, tuple[int, int, str] | int | list[str]]] = field(default_factory=list)

    def replace_span(self, line: int, col: int, end_col: int, new: str) -> None:
        """Replace columns [col, end_col) (1-based) of 1-based `line`."""
        self._ops.append((line - 1, 2, "span", (col - 1, end_col - 1, new)))

    def delete_lines(self, first: int, last: int) -> None:
        self._ops.append((first - 1, 1, "delete", last - 1))

    def insert_after(self, line: int, new_lines: list[str]) -> None:
        """Insert after 1-based `line` (0 = at the top, len(lines) = at the end)."""
        self._ops.append((line - 1, 3, "insert", new_lines))

    def apply(self) -> str:
        lines = list(self.lines)
        for idx, _, kind, payload in sorted(self._ops, key=lambda o: (o[0], o[1]), reverse=True):
            if kind == "span":
                assert isinstance(payload, tuple)
                start, end, new = payload
                lines[idx] = lines[idx][:start] + new + lines[idx][end:]
            elif kind == "delete":
                assert isinstance(payload, int)
                del lines[idx : payload + 1]
            else:
                assert isinstance(payload, list)
                lines[idx + 1 : idx + 1] = list(payload)
        return "\n".join(lines) + "\n"
