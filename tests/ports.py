"""Ports the tests take from the system rather than naming one."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port of 127.0.0.1 nothing listens on now: the system picks it for a socket, which is closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
