"""A free TCP port on loopback, for a server a test starts as a separate process."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now.

    The port is released before it is returned, so another process could take it
    first; the servers started with it bind at once, which makes that rare enough.
    In-process servers bind port 0 themselves instead.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
