"""The test suite's fakes, one home for all: a clock and a scripted ZVM.

* :class:`FakeClock`: time that moves only when a test moves it or the code sleeps;
* :class:`FakeZvm`: a ZVM over ``httpx.MockTransport`` (a token endpoint plus routes).

The config writer that creates files 0600 is :func:`support.config.write_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx

__all__ = ["TOKEN_PATH", "FakeClock", "FakeZvm", "Handler"]

TOKEN_PATH = "/auth/realms/zerto/protocol/openid-connect/token"

Handler = Callable[[httpx.Request], httpx.Response]


class FakeClock:
    """Time that moves only when a test moves it (``now``, :meth:`advance`) or the code
    under test sleeps.

    Called, or as :meth:`mono`, it reads ``now``; :meth:`wall` reads ``now`` plus a fixed
    offset (``wall=`` is the wall time at the start), so the two move together.
    ``at(wall_time, action)`` runs ``action`` once the clock passes ``wall_time``: that is
    how a test changes the world in the middle of the code's wait.
    """

    def __init__(self, now: float = 1000.0, *, wall: float | None = None) -> None:
        self.now = now
        self.offset = 0.0 if wall is None else wall - now
        self.sleeps: list[float] = []
        self._events: list[tuple[float, Callable[[], None]]] = []

    def __call__(self) -> float:
        return self.now

    def mono(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self.offset

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        due = [e for e in self._events if e[0] <= self.wall()]
        self._events = [e for e in self._events if e[0] > self.wall()]
        for _at, action in sorted(due, key=lambda e: e[0]):
            action()

    def at(self, wall_time: float, action: Callable[[], None]) -> None:
        self._events.append((wall_time, action))


class FakeZvm:
    """A scripted ZVM: a token endpoint plus routes keyed by (method, path)."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler | Any] = {}
        self.requests: list[httpx.Request] = []
        self.tokens_issued = 0
        self.expires_in = 300
        self.valid_tokens: set[str] = set()
        self.token_status = 200

    def route(self, method: str, path: str, answer: Handler | Any) -> None:
        """Answer ``method path`` with JSON ``answer``, or call it if it is a handler."""
        self.routes[(method, path)] = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == TOKEN_PATH:
            return self._token(request)
        auth = request.headers.get("Authorization", "")
        if auth.removeprefix("Bearer ") not in self.valid_tokens:
            return httpx.Response(401)
        answer = self.routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(404, json={"Message": f"no route {request.url.path}"})
        if callable(answer):
            return answer(request)
        return httpx.Response(200, json=answer)

    def _token(self, request: httpx.Request) -> httpx.Response:
        if self.token_status != 200:
            body = {
                "error": "unauthorized_client",
                "error_description": "Invalid client credentials",
            }
            return httpx.Response(self.token_status, json=body)
        self.tokens_issued += 1
        token = f"tok-{self.tokens_issued}"
        self.valid_tokens.add(token)
        answer: dict[str, Any] = {
            "access_token": token,
            "expires_in": self.expires_in,
            "refresh_token": "refresh-secret",
            "token_type": "Bearer",
        }
        return httpx.Response(200, json=answer)

    def api_requests(self) -> list[httpx.Request]:
        """Requests other than token requests."""
        return [r for r in self.requests if r.url.path != TOKEN_PATH]
