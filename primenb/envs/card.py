"""`EnvironmentCard`: what ``%prime_env show`` displays (HTML in a notebook, text in a terminal)."""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass, field
from typing import Any

_CSS = "font-family:var(--jp-code-font-family,monospace);font-size:12px;border-collapse:collapse;margin:4px 0"
_TD = "padding:2px 8px;border-bottom:1px solid #ddd;text-align:left;vertical-align:top"


@dataclass
class RewardInfo:
    name: str
    weight: float
    doc: str = ""


@dataclass
class Sample:
    prompt: str
    answer: str
    perfect: str  # the reply scored as the perfect answer
    perfect_reward: float
    empty_reward: float
    perfect_by_func: dict[str, float | str] = field(default_factory=dict)  # str = the error
    empty_by_func: dict[str, float | str] = field(default_factory=dict)


@dataclass
class EnvironmentCard:
    id: str
    source: str  # built-in / local path / installed package / verifiers / ...
    where: str = ""
    version: str = ""
    description: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    rewards: list[RewardInfo] = field(default_factory=list)
    system_prompt: str | None = None
    num_train: int = 0
    num_eval: int = 0
    eval_is_train: bool = False
    samples: list[Sample] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self), default=str))

    # -- text ---------------------------------------------------------------------------------
    def __repr__(self) -> str:
        lines = [f"{self.id}  ({self.source}{': ' + self.where if self.where else ''})"]
        if self.version:
            lines[0] += f"  version {self.version}"
        if self.description:
            lines.append(f"  {self.description}")
        eval_text = "eval = train rows" if self.eval_is_train else f"{self.num_eval} eval"
        lines.append(f"  data: {self.num_train} train, {eval_text}")
        if self.args:
            lines.append("  arguments: " + ", ".join(f"{k}={_short(v)}" for k, v in self.args.items()))
        if self.system_prompt:
            lines.append(f"  system prompt: {_short(self.system_prompt, 100)}")
        lines.append("  reward functions:")
        for r in self.rewards:
            lines.append(f"    {r.name} (weight {r.weight:g}){': ' + _first(r.doc) if r.doc else ''}")
        if self.samples:
            lines.append("  samples (reward of the perfect answer / of an empty answer):")
        for s in self.samples:
            lines.append(
                f"    prompt {_short(s.prompt, 60)!r} -> answer {_short(s.answer, 40)!r}: "
                f"perfect {s.perfect_reward:.3g}{_errs(s.perfect_by_func)}, "
                f"empty {s.empty_reward:.3g}{_errs(s.empty_by_func)}"
            )
        return "\n".join(lines)

    # -- html ---------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        e = html.escape
        head = f"<b>{e(self.id)}</b> <span style='color:#666'>{e(self.source)}"
        head += f" · {e(self.where)}" if self.where else ""
        head += f" · version {e(self.version)}" if self.version else ""
        head += "</span>"
        parts = [f"<div>{head}</div>"]
        if self.description:
            parts.append(f"<div>{e(self.description)}</div>")
        eval_text = "eval uses the train rows" if self.eval_is_train else f"{self.num_eval} eval"
        parts.append(f"<div>data: {self.num_train} train, {e(eval_text)}</div>")
        if self.system_prompt:
            parts.append(f"<div>system prompt: <code>{e(self.system_prompt)}</code></div>")
        if self.args:
            rows = "".join(
                f"<tr><td style='{_TD}'>{e(k)}</td><td style='{_TD}'>{e(_short(v, 80))}</td></tr>"
                for k, v in self.args.items()
            )
            parts.append(
                f"<table style='{_CSS}'><tr><th style='{_TD}'>argument</th>"
                f"<th style='{_TD}'>default</th></tr>{rows}</table>"
            )
        rows = "".join(
            f"<tr><td style='{_TD}'>{e(r.name)}</td><td style='{_TD}'>{r.weight:g}</td>"
            f"<td style='{_TD};white-space:pre-wrap'>{e(r.doc.strip())}</td></tr>"
            for r in self.rewards
        )
        parts.append(
            f"<table style='{_CSS}'><tr><th style='{_TD}'>reward function</th>"
            f"<th style='{_TD}'>weight</th><th style='{_TD}'>doc</th></tr>{rows}</table>"
        )
        if self.samples:
            rows = "".join(
                f"<tr><td style='{_TD};white-space:pre-wrap'>{e(_short(s.prompt, 300))}</td>"
                f"<td style='{_TD}'>{e(_short(s.answer, 100))}</td>"
                f"<td style='{_TD}'>{s.perfect_reward:.3g}{e(_errs(s.perfect_by_func))}</td>"
                f"<td style='{_TD}'>{s.empty_reward:.3g}{e(_errs(s.empty_by_func))}</td></tr>"
                for s in self.samples
            )
            parts.append(
                f"<table style='{_CSS}'><tr><th style='{_TD}'>sample prompt</th>"
                f"<th style='{_TD}'>answer</th><th style='{_TD}'>reward: perfect answer</th>"
                f"<th style='{_TD}'>reward: empty answer</th></tr>{rows}</table>"
            )
        return "<div class='primenb-env'>" + "".join(parts) + "</div>"


def _short(value: Any, n: int = 40) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= n else text[: n - 1] + "…"


def _first(doc: str) -> str:
    lines = [ln.strip() for ln in doc.strip().splitlines()]
    return lines[0] if lines else ""


def _errs(by_func: dict[str, float | str]) -> str:
    bad = [f"{k} raised {v}" for k, v in by_func.items() if isinstance(v, str)]
    return f" ({'; '.join(bad)})" if bad else ""


__all__ = ["EnvironmentCard", "RewardInfo", "Sample"]
