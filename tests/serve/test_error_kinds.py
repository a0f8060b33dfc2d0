"""The serving path's errors have one type and one vocabulary: the engine names the kind of a
refusal, the HTTP status of each kind is declared once, and the client's errors are the same type."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import primenb
from primenb.engine.serve_errors import HTTP_STATUS, ErrorKind, ServeError
from primenb.errors import PrimenbError
from primenb.serve import client

ROOT = Path(primenb.__file__).parent
# the serving core says what went wrong, and so does the HTTP layer: HTTP_STATUS says it as a status
SPEAKS_KINDS = [
    *(ROOT / "engine" / n for n in ("batching.py", "serving.py", "serve_requests.py", "serve_errors.py")),
    ROOT / "engine" / "policy_server.py",  # the training process's own HTTP front
    *sorted((ROOT / "serve").glob("*.py")),
]


def test_every_kind_has_one_status_of_its_own() -> None:
    assert set(HTTP_STATUS) == set(ErrorKind)
    assert len(set(HTTP_STATUS.values())) == len(ErrorKind)  # a status reads back as one kind
    for kind, status in HTTP_STATUS.items():
        assert ServeError("x", kind).status == status


def test_the_client_and_the_server_raise_one_error_type() -> None:
    assert client.ServeError is ServeError
    assert issubclass(ServeError, PrimenbError)  # magics show it as a message, not a traceback


def _status_arguments(path: Path) -> list[str]:
    """Where a ServeError is given an int (an HTTP status) instead of an ErrorKind."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "ServeError":
            given = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "kind")]
            found += [f"{path.name}:{node.lineno}" for a in given if isinstance(a, ast.Constant)]
    return found


@pytest.mark.parametrize("path", SPEAKS_KINDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_serving_path_names_kinds_not_http_statuses(path: Path) -> None:
    assert _status_arguments(path) == []
