"""The one error type of the serving path (no torch here, so the HTTP layer and the client can import
it): the engine says what kind of refusal it is, an HTTP front says it as the status of that kind."""

from __future__ import annotations

import enum

from primenb.errors import PrimenbError


class ErrorKind(enum.Enum):
    """Why a request is not answered; the engine names the kind, never an HTTP status."""

    INVALID = "invalid"  # the request itself is wrong: fix it and send it again
    UNAUTHORISED = "unauthorised"  # no key, or the wrong one
    FORBIDDEN = "forbidden"  # allowed to no one from here (a path outside the served roots)
    NOT_FOUND = "not_found"  # the model, adapter or checkpoint named does not exist
    CONFLICT = "conflict"  # the id is taken already
    TOO_LARGE = "too_large"  # the body is larger than the server takes
    BUSY = "busy"  # the queue is full: try again shortly
    FAILED = "failed"  # the server's own fault
    STOPPING = "stopping"  # the server is stopping: start it again
    TIMED_OUT = "timed_out"  # no answer in time


# The one place a kind becomes an HTTP status: the OpenAI-style server (`primenb.serve`) and the
# policy server inside training (`primenb.engine.policy_server`, which may not import serve) read it.
HTTP_STATUS: dict[ErrorKind, int] = {
    ErrorKind.INVALID: 400,
    ErrorKind.UNAUTHORISED: 401,
    ErrorKind.FORBIDDEN: 403,
    ErrorKind.NOT_FOUND: 404,
    ErrorKind.CONFLICT: 409,
    ErrorKind.TOO_LARGE: 413,
    ErrorKind.BUSY: 429,
    ErrorKind.FAILED: 500,
    ErrorKind.STOPPING: 503,
    ErrorKind.TIMED_OUT: 504,
}


class ServeError(PrimenbError):
    """A request the server cannot answer, or a server the client cannot start or reach: ``kind``
    says why, ``param`` the field, ``code`` OpenAI's error code. The message says what to do."""

    def __init__(
        self,
        message: str,
        kind: ErrorKind = ErrorKind.INVALID,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.param, self.code = param, code

    @property
    def status(self) -> int:
        """The HTTP status an HTTP front answers this error with."""
        return HTTP_STATUS[self.kind]


__all__ = ["HTTP_STATUS", "ErrorKind", "ServeError"]
