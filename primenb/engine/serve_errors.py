"""The one error type of the serving path (no torch here, so the HTTP layer can import it)."""

from __future__ import annotations


class ServeError(Exception):
    """A request the server cannot answer; ``status`` is the HTTP status, ``param`` the field."""

    def __init__(self, message: str, status: int = 400, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code


__all__ = ["ServeError"]
