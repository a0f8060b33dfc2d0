"""What reaches a log: secrets are always redacted; under ``data_collection = "deny"`` no exception
message is written either (a reward function that raises with the prompt in its message, or
Python's own ``int(completion)`` error, would otherwise put private text into engine.log and, via
stderr, launcher.log). Types and code locations are kept: they say where it failed, not on what.
"""

from __future__ import annotations

import contextlib
import logging
import re
import traceback
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from primenb.protocol.hashing import redact_text

if TYPE_CHECKING:
    from primenb.protocol.rundir import RunDir

DENY = "deny"  # the `data_collection` value that keeps prompt and completion text out of the run
WITHHELD = '(message withheld: data_collection = "deny")'
_private = False


def set_private(on: bool) -> None:
    """Turn deny mode on for this process (the engine does, from the run's config)."""
    global _private
    _private = bool(on)


def is_private() -> bool:
    return _private


# Library loggers that write request bodies (prompts) at DEBUG: the openai client logs each
# request's options, messages included, when a kernel's logging is at DEBUG.
BODY_LOGGERS = ("openai._base_client",)


def _no_debug(record: logging.LogRecord) -> bool:
    return record.levelno > logging.DEBUG


@contextlib.contextmanager
def private_while(on: bool) -> Iterator[None]:
    """Deny mode for the body when ``on`` (an eval of a deny trace in the notebook's own process),
    restored after: the kernel's other work keeps its own mode. The request bodies an eval sends
    are kept out of the kernel's DEBUG log too (`BODY_LOGGERS`)."""
    global _private
    before = _private
    _private = before or bool(on)
    quiet = _private and not before
    if quiet:
        for name in BODY_LOGGERS:
            logging.getLogger(name).addFilter(_no_debug)
    try:
        yield
    finally:
        _private = before
        if quiet:
            for name in BODY_LOGGERS:
                logging.getLogger(name).removeFilter(_no_debug)


TEXT_FIELDS = ("prompt", "completion", "answer")


def denies(privacy: Any) -> bool:
    """The one answer to "does this run deny data collection?", from its privacy settings: a
    config's ``[primenb.privacy]`` table (as a dict or as the parsed section), a trace's
    ``privacy`` part, or the engine's plan; anything with a ``data_collection`` key or attribute.
    Every other reader finds those settings and asks here."""
    if isinstance(privacy, Mapping):
        value = privacy.get("data_collection")
    else:
        value = getattr(privacy, "data_collection", None)
    return value == DENY


def config_denies(config: Any) -> bool:
    """``[primenb.privacy] data_collection = "deny"`` in a run's config (a dict read from its
    config.toml); a config that cannot be read as one counts as denying."""
    if not isinstance(config, dict):
        return True
    primenb = config.get("primenb")
    return denies(primenb.get("privacy") if isinstance(primenb, dict) else None)


def run_denies(run_dir: RunDir) -> bool:
    """The config of the run in ``run_dir`` denies (read each time: cheap); a config that cannot
    be read counts as denying."""
    try:
        return config_denies(run_dir.read_config())
    except (OSError, ValueError):
        return True


def trace_denies(doc: Mapping[str, Any]) -> bool:
    """A trace document (trace.json) records a run that denied (one without a privacy part did not)."""
    return denies(doc.get("privacy"))


def withhold_sample(row: dict[str, Any]) -> dict[str, Any]:
    """A sample row for deny mode: prompt, completion and answer become a keyed hash and a
    length (as the local engine writes them); rewards and steps are kept."""
    from primenb.protocol.hashing import private_digest

    out = {k: v for k, v in row.items() if k not in TEXT_FIELDS}
    for key in TEXT_FIELDS:
        value = row.get(key)
        if isinstance(value, str):
            out[f"{key}_hash"] = private_digest(value)
            out[f"{key}_chars"] = len(value)
    return out


def withheld_or(text: str) -> str:
    """``text`` (a piece of data quoted in a message: a prompt, a row), or the withheld marker
    in deny mode."""
    return WITHHELD if _private else redact_text(text)


def error_text(exc: BaseException) -> str:
    """``Type: message``, or ``Type (message withheld ...)`` in deny mode."""
    text = str(exc).strip()
    if _private and text:
        return f"{type(exc).__name__} {WITHHELD}"
    return redact_text(f"{type(exc).__name__}: {text}" if text else type(exc).__name__)


def frames_only(exc: BaseException) -> str:
    """A traceback with its frames (file, line, function) but no exception messages."""
    lines = ["Traceback (most recent call last):"]
    for f in traceback.extract_tb(exc.__traceback__):
        lines.append(f'  File "{f.filename}", line {f.lineno}, in {f.name}')
    lines.append(f"{type(exc).__name__} {WITHHELD}")
    return "\n".join(lines)


def _withhold(arg: Any) -> Any:
    return error_text(arg) if isinstance(arg, BaseException) else arg


class LogFilter(logging.Filter):
    """Installed on every handler of the engine's root logger (handler filters also see records
    that propagate from libraries): the formatted message is redacted; in deny mode exception
    arguments and tracebacks lose their messages first."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            if _private:
                if isinstance(record.args, tuple):
                    record.args = tuple(_withhold(a) for a in record.args)
                if record.exc_info and record.exc_info[1] is not None:
                    record.exc_text = frames_only(record.exc_info[1])
                    record.exc_info = None
            record.msg = redact_text(record.getMessage())
            record.args = ()
            if record.exc_text:
                record.exc_text = redact_text(record.exc_text)
        except Exception:  # a log line must never break training
            record.msg, record.args = "(log message could not be formatted)", ()
        return True


_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z ]{0,40}PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END[A-Z ]{0,40}PRIVATE KEY-----")


class RedactingStream:
    """A text stream (the engine's stdout and stderr: logs/launcher.log) that applies the secret rule
    to whole lines before they are written: what third-party libraries print there themselves
    (MLflow's "View run at http://user:pass@host" lines, a client's header dump) never passes
    through the engine's log filter. Whole lines, so a secret split across two writes is seen;
    a partial line is written when the stream is flushed (progress bars, the interpreter's exit)."""

    MAX_PENDING = 64 * 1024  # characters of an unfinished line held back

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._pending = ""
        self._in_key = False  # inside a PEM private key block printed over several lines

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            return int(self._inner.write(text))
        self._pending += text
        if "\n" in text:
            done, _, self._pending = self._pending.rpartition("\n")
            self._inner.write("".join(self._line(line) for line in (done + "\n").splitlines(keepends=True)))
        if len(self._pending) > self.MAX_PENDING:
            self._write_pending()
        return len(text)

    def _line(self, line: str) -> str:
        """One whole line, redacted; the lines of a private key block after its BEGIN line vanish."""
        if self._in_key:
            self._in_key = not _PEM_END.search(line)
            return ""
        if _PEM_BEGIN.search(line) and not _PEM_END.search(line):
            self._in_key = True
        return redact_text(line)

    def _write_pending(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, ""
            self._inner.write(redact_text(pending))

    def flush(self) -> None:
        self._write_pending()
        self._inner.flush()

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer...: the stream's own
        return getattr(self._inner, name)


__all__ = [
    "DENY",
    "WITHHELD",
    "LogFilter",
    "RedactingStream",
    "config_denies",
    "denies",
    "error_text",
    "frames_only",
    "is_private",
    "run_denies",
    "set_private",
    "trace_denies",
    "withheld_or",
    "withhold_sample",
]
