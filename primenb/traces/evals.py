"""The latest evaluation per environment stored with a trace (``evals/<env>.json``, written by
``%prime_eval``), read for the views: the traces table, ``show TRACE``, ``diff``, ``compare`` and
the sidebar.

The files are read as hostile input, like every run file: through the one safe reader (regular
files inside the run directory, bounded, depth-capped), typed by `EvalDoc` (a wrong-typed field
becomes unknown). A file that is not an evaluation is left out and said in ``warnings``; nothing
here raises for a bad file.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from primenb.protocol.documents import EvalDoc, EvalSummary, read_document, typed
from primenb.protocol.rundir import RunDir
from primenb.protocol.safepath import slug

MAX_EVAL_FILES = 200  # environments read per run: a folder of thousands of files cannot stall a view
COLUMN_PREFIX = "eval:"  # the traces table's column of an environment: ``eval:<env>``


@dataclass(frozen=True)
class LatestEval:
    """One environment's latest evaluation of a run's model (any field may be unknown: None)."""

    env: str
    mean: float | None = None
    std: float | None = None
    ci95_low: float | None = None
    ci95_high: float | None = None
    n: int | None = None
    temperature: float | None = None
    created: float | None = None  # seconds since the epoch
    model: str | None = None

    @property
    def when(self) -> str:
        """``created`` as local time (``2026-12-03 22:41``); empty when unknown."""
        import datetime as dt

        if self.created is None:
            return ""
        try:
            return dt.datetime.fromtimestamp(self.created).strftime("%Y-%m-%d %H:%M")
        except (OverflowError, OSError, ValueError):  # a timestamp no calendar holds
            return ""

    def line(self) -> str:
        """One readable line: ``0.412 ± 0.05 (n 20, temperature 0, 2026-12-03 22:41)``."""
        from primenb.traces.views import fmt

        spread = ""
        if self.mean is not None and self.ci95_high is not None:
            spread = f" ± {fmt(self.ci95_high - self.mean, digits=2)}"
        facts = [
            f"n {self.n}" if self.n is not None else "",
            f"temperature {fmt(self.temperature)}" if self.temperature is not None else "",
            self.when,
        ]
        shown = ", ".join(f for f in facts if f)
        return f"{fmt(self.mean) or '?'}{spread}" + (f" ({shown})" if shown else "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "mean": self.mean,
            "std": self.std,
            "ci95_low": self.ci95_low,
            "ci95_high": self.ci95_high,
            "n": self.n,
            "temperature": self.temperature,
            "created": self.created,
            "model": self.model,
        }


@dataclass
class Evals:
    """A run's latest evaluations, by environment (sorted), and what could not be read."""

    items: list[LatestEval] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def by_env(self) -> dict[str, LatestEval]:
        return {e.env: e for e in self.items}


def _number(value: Any) -> float | None:
    """A finite number, else unknown (a NaN mean: no rollout was scored)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _from_doc(stem: str, doc: Mapping[str, Any] | EvalDoc) -> LatestEval:
    ev = typed(EvalDoc, doc)
    env = ev.env
    # the file name is the environment's slug: a document naming another environment is not trusted
    trusted = env is not None and env.isprintable() and len(env) <= 200 and slug(env) == stem
    name = str(env) if trusted else stem
    summary = ev.summary or EvalSummary()
    return LatestEval(
        env=name,
        mean=_number(summary.reward_mean),
        std=_number(summary.reward_std),
        ci95_low=_number(summary.ci95_low),
        ci95_high=_number(summary.ci95_high),
        n=summary.n,
        temperature=_number(ev.temperature),
        created=_number(ev.created),
        model=ev.model,
    )


def _eval_files(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as it:
            entries = [e for e in it if e.name.endswith(".json") and not e.name.startswith(".")]
    except (OSError, ValueError):  # no evals yet (the common case), or not a folder
        return []
    return sorted(entries, key=lambda e: e.name)[:MAX_EVAL_FILES]


# path -> (lstat signature, the file read): `show` over many traces re-reads only changed files
_Read = tuple[LatestEval | None, list[str]]
_CACHE: dict[str, tuple[tuple[int, int, int, int], _Read]] = {}
MAX_CACHED = 50_000


def _read_one(entry: os.DirEntry[str], root: str) -> _Read:
    try:
        st = entry.stat(follow_symlinks=False)
        sig = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        sig = None
    hit = _CACHE.get(entry.path) if sig is not None else None
    if hit is not None and hit[0] == sig:
        return hit[1]
    doc, why = read_document(EvalDoc, entry.path, root=root)
    if doc is None:
        why = (why or "unreadable").removeprefix(f"{entry.name}: ")  # a typing failure names the file already
        read: _Read = (None, [f"{RunDir.EVALS}/{entry.name}: {why}"])
    else:
        # each warning starts with the file name
        read = (_from_doc(entry.name[: -len(".json")], doc), [f"{RunDir.EVALS}/{w}" for w in doc.warnings])
    if sig is not None:
        if len(_CACHE) >= MAX_CACHED:
            _CACHE.clear()
        _CACHE[entry.path] = (sig, read)
    return read


def read_evals(run_dir: str | os.PathLike[str] | None) -> Evals:
    """The latest evaluation per environment of the run in ``run_dir`` (none when it has no
    ``evals/`` folder); unreadable or foreign files are skipped and named in ``warnings``."""
    out = Evals()
    if not run_dir:
        return out
    root = os.fspath(run_dir)
    for entry in _eval_files(os.path.join(root, RunDir.EVALS)):
        item, warnings = _read_one(entry, root)
        out.warnings += warnings
        if item is not None:
            out.items.append(item)
    return out


def column(env: str) -> str:
    """The traces table's column for ``env``'s latest mean reward."""
    return f"{COLUMN_PREFIX}{env}"


__all__ = ["COLUMN_PREFIX", "Evals", "LatestEval", "column", "read_evals"]
