"""Incremental detokenisation with stop strings: each new token costs a decode of a few tokens, not
of the whole completion, and no text is sent that a stop string could still swallow."""

from __future__ import annotations

from typing import Any


class TextStream:
    """Text of one completion, token by token. Each step decodes the tokens since the last text it
    produced, twice (with and without the newest), and keeps the difference: a word piece whose
    spacing depends on the token before it and a character split over tokens both come out right.

    ``push(token_id)`` returns the text that is now safe to send (possibly ""), ``close()`` the rest.
    ``stopped`` turns true when a stop string appeared: the text ends before it (after it with
    ``include_stop``), and the row stops. As vLLM, stop strings are looked for once more than
    ``min_tokens`` tokens came, and special tokens are left out of the text unless
    ``skip_special_tokens`` is false.
    """

    def __init__(
        self,
        tokenizer: Any,
        stop: tuple[str, ...] = (),
        *,
        skip_special_tokens: bool = True,
        include_stop: bool = False,
        min_tokens: int = 0,
    ) -> None:
        self.tok = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.skip_special = skip_special_tokens
        self.include_stop = include_stop
        self.min_tokens = min_tokens
        self.hold = max((len(s) for s in self.stop), default=1) - 1  # a stop string may still be forming
        self.ids: list[int] = []
        self.text = ""  # everything decoded so far (cut at a stop string once one appears)
        self.sent = 0  # characters of ``text`` already returned
        self._prefix = 0  # ids[_prefix:_read] decoded to the text already in ``self.text``
        self._read = 0
        self.stopped = False

    def _decode(self, ids: list[int]) -> str:
        return str(self.tok.decode(ids, skip_special_tokens=self.skip_special))

    def push(self, token_id: int) -> str:
        if self.stopped:
            return ""
        self.ids.append(token_id)
        before = self._decode(self.ids[self._prefix : self._read])
        after = self._decode(self.ids[self._prefix :])
        if len(after) > len(before) and not after.endswith("\ufffd"):  # not half a character
            start = len(self.text)
            self.text += after[len(before) :]
            self._prefix, self._read = self._read, len(self.ids)
            self._check_stop(start)
        return self._take(final=self.stopped)

    def close(self) -> str:
        """The end of the completion (EOS, length, abort): everything not yet sent."""
        if not self.stopped and self._read < len(self.ids):  # a trailing partial character
            tail = self._decode(self.ids[self._prefix :])[len(self._decode(self.ids[self._prefix : self._read])) :]
            start = len(self.text)
            self.text += tail
            self._check_stop(start)
        return self._take(final=True)

    def _check_stop(self, start: int) -> None:
        if not self.stop or len(self.ids) <= self.min_tokens:
            return
        lo = max(0, start - self.hold)  # a stop string may begin in text already decoded
        hits = [(i, len(s)) for i, s in ((self.text.find(s, lo), s) for s in self.stop) if i >= 0]
        if hits:
            at, length = min(hits)
            self.text = self.text[: at + length if self.include_stop else at]
            self.stopped = True

    def _take(self, *, final: bool) -> str:
        safe = len(self.text) if final else max(self.sent, len(self.text) - self.hold)
        out = self.text[self.sent : safe]
        self.sent = max(self.sent, safe)
        return out


__all__ = ["TextStream"]
