"""Keycloak's token endpoint, as far as a ZVM client sees it."""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.errors import SimError

PUBLIC_CLIENT = "zerto-client"
_BAD_USER = {"error": "invalid_grant", "error_description": "Invalid user credentials"}
BAD_CLIENT = {
    "error": "unauthorized_client",
    "error_description": "Invalid client or Invalid client credentials",
}


@dataclass(frozen=True)
class Credentials:
    """One ZVM's confidential client and password-grant user."""

    client_id: str
    client_secret: str
    username: str
    password: str

    @classmethod
    def of(cls, config: SimConfig) -> Credentials:
        """The credentials a :class:`SimConfig` gives (the first ZVM's)."""
        return cls(config.client_id, config.client_secret, config.username, config.password)


@dataclass
class _Token:
    expires: float
    username: str


class TokenStore:
    """Issued access and refresh tokens; all opaque random strings."""

    def __init__(self, config: SimConfig, credentials: Credentials | None = None) -> None:
        self.config = config
        self._credentials = credentials
        self.access: dict[str, _Token] = {}
        self.refresh: dict[str, _Token] = {}

    @property
    def credentials(self) -> Credentials:
        """This ZVM's credentials (the config's, read when asked, unless given)."""
        return self._credentials or Credentials.of(self.config)

    def grant(self, form: dict[str, str]) -> dict[str, Any]:
        """Answer a token request or raise a Keycloak-shaped :class:`SimError`."""
        grant = form.get("grant_type", "")
        if grant == "password":
            user = self._password(form)
        elif grant == "client_credentials":
            self._client(form, require_secret=True)
            user = f"service-account-{form.get('client_id', '')}"
        elif grant == "refresh_token":
            user = self._refreshed(form)
        else:
            body = {
                "error": "unsupported_grant_type",
                "error_description": "Unsupported grant_type",
            }
            raise SimError(400, body)
        return self._issue(user)

    def _client(self, form: dict[str, str], *, require_secret: bool) -> None:
        client_id = form.get("client_id", "")
        if client_id == PUBLIC_CLIENT and not require_secret:
            return
        ok = client_id == self.credentials.client_id and secrets.compare_digest(
            form.get("client_secret", ""), self.credentials.client_secret
        )
        if not ok:
            raise SimError(401, BAD_CLIENT)

    def _password(self, form: dict[str, str]) -> str:
        self._client(form, require_secret=False)
        ok = form.get("username", "") == self.credentials.username and secrets.compare_digest(
            form.get("password", ""), self.credentials.password
        )
        if not ok:
            raise SimError(401, _BAD_USER)
        return self.credentials.username

    def _refreshed(self, form: dict[str, str]) -> str:
        token = self.refresh.pop(form.get("refresh_token", ""), None)
        if token is None or token.expires <= self.config.clock():
            body = {"error": "invalid_grant", "error_description": "Invalid refresh token"}
            raise SimError(400, body)
        return token.username

    def _issue(self, username: str) -> dict[str, Any]:
        now = self.config.clock()
        ttl = self.config.token_ttl_s
        access, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self.access[access] = _Token(now + ttl, username)
        self.refresh[refresh] = _Token(now + 6 * ttl, username)
        return {
            "access_token": access,
            "expires_in": ttl,
            "refresh_expires_in": 6 * ttl,
            "refresh_token": refresh,
            "token_type": "Bearer",
            "not-before-policy": 0,
            "session_state": str(uuid.uuid4()),
            "scope": "profile email",
        }

    def user_of(self, authorization: str | None) -> str | None:
        """The user behind a valid ``Authorization: Bearer`` header, else None."""
        scheme, _, token = (authorization or "").partition(" ")
        found = self.access.get(token.strip()) if scheme.lower() == "bearer" else None
        if found is None or found.expires <= self.config.clock():
            return None
        return found.username

    def expire_all(self) -> int:
        """Invalidate every issued token; return how many access tokens there were."""
        count = len(self.access)
        self.access.clear()
        self.refresh.clear()
        return count
