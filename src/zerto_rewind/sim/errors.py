"""SimError: an HTTP error the simulator answers with, body as the real ZVM shapes it."""

from __future__ import annotations

from typing import Any

from zerto_rewind.errors import ZertoRewindError


class SimError(ZertoRewindError):
    """Answer ``status`` with JSON ``body`` (``{"Message": ...}`` on /v1)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


def bad_request(message: str) -> SimError:
    """400 with an ASP.NET-style body."""
    return SimError(400, {"Message": message})


def not_found(message: str) -> SimError:
    """404 with an ASP.NET-style body."""
    return SimError(404, {"Message": message})
