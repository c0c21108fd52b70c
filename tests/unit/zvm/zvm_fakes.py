"""Fakes for the ZVM client's unit tests: settings, a fake clock, a scripted ZVM, wire samples."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from zerto_rewind.config import ZvmSettings

URL = "https://zvm.example:443"
SECRET = "s3cret-value"
TOKEN_PATH = "/auth/realms/zerto/protocol/openid-connect/token"

Handler = Callable[[httpx.Request], httpx.Response]


def make_settings(**overrides: Any) -> ZvmSettings:
    """ZvmSettings for a client_credentials identity with an inline secret."""
    values: dict[str, Any] = {
        "url": URL,
        "grant": "client_credentials",
        "client_id": "rewind",
        "username": None,
        "secret_source": ("inline", SECRET),
    }
    values.update(overrides)
    return ZvmSettings(**values)


class FakeClock:
    """A monotonic clock that only moves when someone sleeps."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


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


def body_of(request: httpx.Request) -> Any:
    """The decoded JSON body of a recorded request."""
    return json.loads(request.content)


VPG_WIRE: dict[str, Any] = {
    "VpgIdentifier": "11111111-aaaa-bbbb-cccc-000000000001",
    "VpgName": "jp-local",
    "Status": 1,
    "SubStatus": 0,
    "Entities": {"Protected": 0, "Recovery": 0},
    "ProtectedSiteName": "Site-A",
    "RecoverySiteName": "Site-B",
    "ActualRPO": 6,
    "ConfiguredRpoSeconds": 300,
    "HistoryStatusApi": {"ActualHistoryInMinutes": 60, "ConfiguredHistoryInMinutes": 60},
    "VmsCount": 1,
    "ActiveProcessesApi": {"RunningFailOverTestApi": None},
    "Link": {"href": "https://zvm/v1/vpgs/x", "identifier": "x", "rel": None, "type": "VpgApi"},
}

VM_WIRE: dict[str, Any] = {
    "VmIdentifier": "d4a6a1d5-79e9-4308-990a-7c3e616f0908.vm-38",
    "VmName": "jp-ubuntu",
    "VpgIdentifier": VPG_WIRE["VpgIdentifier"],
    "VpgName": "jp-local",
    "Status": 1,
}
