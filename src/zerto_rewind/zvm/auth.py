"""Keycloak tokens for the ZVM, and a token cache shared by every process.

Hooks are short-lived processes, often started many at once, so a token is
cached on disk (one 0600 file per ZVM + identity, replaced atomically) and
fetched under a per-identity lock with a re-check after the lock is taken:
twenty processes starting together make one token request, not twenty.
Gateway replicas share one cache in Redis instead (``token_redis``): any
:class:`TokenCacheLike` will do, and ``token_store.open_token_cache`` picks one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ApiError, AuthError, StateError, ZvmTimeout
from ..fsutil import atomic_write_json, ensure_private_dir, file_lock, read_json
from ._http import HttpCore, ZvmSettingsLike, api_error, bad_body, decode_json

__all__ = [
    "CachedToken",
    "TokenCache",
    "TokenCacheLike",
    "TokenProvider",
    "identity_key",
]

TOKEN_PATH = "/auth/realms/zerto/protocol/openid-connect/token"  # noqa: S105 (a URL path)
_DEFAULT_LIFETIME_S = 60.0  # when Keycloak omits expires_in


@dataclass(frozen=True)
class CachedToken:
    """An access token and when to stop using it (wall-clock seconds)."""

    access_token: str
    token_type: str
    expires_at: float
    refresh_at: float

    @classmethod
    def issued(
        cls, access_token: str, token_type: str, lifetime_s: float, now: float
    ) -> CachedToken:
        """A token issued at ``now``; refreshed ``min(30 s, 10 %)`` before it expires."""
        margin = min(30.0, 0.1 * lifetime_s)
        return cls(access_token, token_type, now + lifetime_s, now + lifetime_s - margin)

    def fresh(self, now: float) -> bool:
        """True while the token may still be used."""
        return now < self.refresh_at

    def to_json(self) -> dict[str, Any]:
        """The on-disk form, its fields (no refresh token is ever stored)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> CachedToken | None:
        """Parse the on-disk form; ``None`` if it is not one."""
        if not isinstance(data, dict):
            return None
        token, kind = data.get("access_token"), data.get("token_type", "Bearer")
        expires, refresh = data.get("expires_at"), data.get("refresh_at")
        if not (isinstance(token, str) and token and isinstance(kind, str)):
            return None
        if not (isinstance(expires, int | float) and isinstance(refresh, int | float)):
            return None
        return cls(token, kind, float(expires), float(refresh))


def identity_key(settings: ZvmSettingsLike) -> str:
    """sha256 of (ZVM URL, grant, client id, username): names the cache file, never the secret."""
    who = settings.username if settings.grant == "password" else ""
    raw = "\n".join(
        (settings.url.rstrip("/").lower(), settings.grant, settings.client_id, who or "")
    )
    return hashlib.sha256(raw.encode()).hexdigest()


@runtime_checkable
class TokenCacheLike(Protocol):
    """A token cache shared by processes: the file one here, or Redis for gateway replicas."""

    wall_clock: Callable[[], float]

    def load(self, key: str) -> CachedToken | None:
        """The cached token for ``key`` if it is still fresh."""
        ...

    def store(self, key: str, token: CachedToken) -> None:
        """Replace the cached token for ``key``."""
        ...

    def drop(self, key: str, access_token: str) -> None:
        """Forget the cached token if it is still ``access_token`` (call under :meth:`lock`)."""
        ...

    def lock(self, key: str, timeout_s: float | None) -> AbstractContextManager[None]:
        """Hold the per-identity lock; ZvmTimeout if it is not free within ``timeout_s``."""
        ...


class TokenCache:
    """Token files under ``<state_dir>/tokens/``: one per identity, 0600, atomically replaced."""

    def __init__(self, state_dir: str, *, wall_clock: Callable[[], float] = time.time) -> None:
        ensure_private_dir(state_dir)
        self.directory = ensure_private_dir(os.path.join(state_dir, "tokens"))
        self.wall_clock = wall_clock

    def path(self, key: str) -> str:
        """The cache file for identity ``key``."""
        return os.path.join(self.directory, f"{key}.json")

    def load(self, key: str) -> CachedToken | None:
        """The cached token for ``key`` if it is still fresh."""
        token = CachedToken.from_json(read_json(self.path(key)))
        return token if token and token.fresh(self.wall_clock()) else None

    def store(self, key: str, token: CachedToken) -> None:
        """Replace the cached token for ``key``."""
        atomic_write_json(self.path(key), token.to_json())

    def drop(self, key: str, access_token: str) -> None:
        """Delete the cache file if it still holds ``access_token`` (call under :meth:`lock`)."""
        held = CachedToken.from_json(read_json(self.path(key)))
        if held and held.access_token == access_token:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path(key))

    @contextlib.contextmanager
    def lock(self, key: str, timeout_s: float | None) -> Iterator[None]:
        """Hold the per-identity lock; ZvmTimeout if it is not free within ``timeout_s``."""
        path = os.path.join(self.directory, f"{key}.lock")
        try:
            with file_lock(path, timeout_s=timeout_s):
                yield
        except StateError as exc:
            if timeout_s is not None and "timed out" in str(exc):
                msg = f"timed out waiting for another process to fetch a ZVM token ({path})"
                raise ZvmTimeout(msg) from exc
            raise


class TokenProvider:
    """Hands out bearer tokens for one ZVM identity: memory, then the file cache, then Keycloak."""

    def __init__(
        self,
        settings: ZvmSettingsLike,
        http: HttpCore,
        *,
        cache: TokenCacheLike | None = None,
        scope: str | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.http = http
        self.cache = cache
        self.scope = scope
        self.wall_clock = cache.wall_clock if cache else wall_clock
        self.key = identity_key(settings)
        self._token: CachedToken | None = None

    def token(self, deadline: float | None) -> str:
        """A fresh access token, fetching one only if nobody else has."""
        if self._token and self._token.fresh(self.wall_clock()):
            return self._token.access_token
        if self.cache is None:
            self._token = self._fetch(deadline)
            return self._token.access_token
        with self.cache.lock(self.key, self._left(deadline)):
            # Re-check: another process may have fetched while we waited.
            self._token = self.cache.load(self.key)
            if self._token is None:
                self._token = self._fetch(deadline)
                self.cache.store(self.key, self._token)
        return self._token.access_token

    def invalidate(self, access_token: str, deadline: float | None = None) -> None:
        """Forget ``access_token`` (the ZVM rejected it) here and in the shared cache."""
        if self._token and self._token.access_token == access_token:
            self._token = None
        if self.cache is not None:
            with self.cache.lock(self.key, self._left(deadline)):
                self.cache.drop(self.key, access_token)

    def _left(self, deadline: float | None) -> float | None:
        if deadline is None:
            return None
        left = deadline - self.http.clock()
        if left <= 0:
            msg = "no time left before the deadline to get a ZVM token"
            raise ZvmTimeout(msg)
        return left

    def _form(self) -> dict[str, str]:
        s = self.settings
        form = {"grant_type": s.grant, "client_id": s.client_id}
        if s.grant == "password":
            form.update(username=s.username or "", password=s.secret())
        else:
            form["client_secret"] = s.secret()
        if self.scope:
            form["scope"] = self.scope
        return form

    def _fetch(self, deadline: float | None) -> CachedToken:
        # A token request is safe to repeat: a duplicate only mints a spare token.
        response = self.http.request(
            "POST", TOKEN_PATH, deadline=deadline, idempotent=True, data=self._form()
        )
        if response.status_code in (400, 401):
            raise AuthError(self._refused(response))
        if response.status_code >= 300:
            raise api_error(response, "the ZVM's Keycloak is not answering normally")
        return self._parse(response)

    def _parse(self, response: Any) -> CachedToken:
        data = decode_json(response)
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise bad_body(response, "no access_token")
        lifetime = data.get("expires_in")
        lifetime = (
            float(lifetime)
            if isinstance(lifetime, int | float) and lifetime > 0
            else _DEFAULT_LIFETIME_S
        )
        kind = data.get("token_type") if isinstance(data.get("token_type"), str) else "Bearer"
        return CachedToken.issued(token, str(kind), lifetime, self.wall_clock())

    def _refused(self, response: Any) -> str:
        s = self.settings
        who = f"client '{s.client_id}'" + (
            f", user '{s.username}'" if s.grant == "password" else ""
        )
        try:
            body = decode_json(response)
        except ApiError:
            body = None
        detail = ""
        if isinstance(body, dict):
            detail = ": ".join(str(body[k]) for k in ("error", "error_description") if body.get(k))
        hint = getattr(s, "secret_hint", None)
        where = f" (secret from {hint})" if isinstance(hint, str) else ""
        return (
            f"{s.url}{TOKEN_PATH} refused the {s.grant} grant for {who} "
            f"(HTTP {response.status_code}{': ' + detail if detail else ''}); "
            f"check the configured credentials{where}"
        )
