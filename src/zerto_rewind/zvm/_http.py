"""The HTTP layer under the ZVM client: one connection pool, deadlines, retries, error mapping.

This is the one boundary where httpx, ssl and json exceptions are caught and
turned into the error tree; nothing above it sees an ``httpx.*`` exception.
"""

from __future__ import annotations

import json
import logging
import random
import ssl
import sys
from collections.abc import Callable, Mapping
from typing import Any, Protocol

if "httpx" not in sys.modules:
    # httpx's __init__ imports its command-line tool (click, rich, pygments) when
    # they are installed: ~40 ms on every guarded hook call for nothing. A None
    # entry makes that import fail, which httpx catches; the entry is removed
    # again so that ``httpx._main`` stays importable for anyone who wants it.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    try:
        import httpx
    finally:
        if sys.modules.get("httpx._main", 0) is None:
            del sys.modules["httpx._main"]
else:
    import httpx

from ..errors import (
    ApiError,
    ConfigError,
    NotFound,
    ZvmConnectionError,
    ZvmError,
    ZvmTimeout,
    ZvmTlsError,
)

__all__ = ["BODY_EXCERPT", "HttpCore", "ZvmSettingsLike", "api_error", "decode_json"]

log = logging.getLogger("zerto_rewind.zvm")

BODY_EXCERPT = 300
_BAD_BODY = "ZVM returned a body that is not the JSON we expected"


def _key(settings: object, leaf: str) -> str:
    """The config key a hint names: ``zvm.url``, or ``zvms.dr.url`` for an estate's site."""
    return f"{getattr(settings, 'config_key', 'zvm')}.{leaf}"


def _ca_hint(settings: object) -> str:
    return f"set {_key(settings, 'ca_bundle')} to the ZVM's CA certificate (PEM)"


# Everything sending can raise besides our own errors: httpx's tree, a few
# httpx exceptions outside it, and raw ssl/OS errors from custom transports.
_SEND_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ssl.SSLError, OSError)


class ZvmSettingsLike(Protocol):
    """The part of ``config.ZvmSettings`` the client reads."""

    url: str
    grant: str
    client_id: str
    username: str | None
    ca_bundle: str | None
    verify_tls: bool
    connect_timeout_s: float
    read_timeout_s: float

    def secret(self) -> str: ...


def _verify(settings: ZvmSettingsLike) -> ssl.SSLContext | bool:
    if settings.ca_bundle:
        try:
            return ssl.create_default_context(cafile=settings.ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            msg = f"cannot load CA bundle {settings.ca_bundle}: {exc}; point it at a PEM file"
            raise ConfigError(msg, key=_key(settings, "ca_bundle")) from exc
    if settings.verify_tls is False:
        where = _key(settings, "verify_tls")
        log.warning("TLS verification of %s is OFF (%s=false)", settings.url, where)
        return False
    return True


class HttpCore:
    """Sends requests to one ZVM with a deadline, bounded retries and mapped errors."""

    def __init__(
        self,
        settings: ZvmSettingsLike,
        *,
        transport: httpx.BaseTransport | None,
        retries: int,
        backoff_s: float,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self.settings = settings
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.clock = clock
        self.sleep = sleep
        self.request_count = 0
        # trust_env=False: config.py is the only reader of the environment.
        self._client = httpx.Client(
            base_url=settings.url,
            verify=_verify(settings),
            transport=transport,
            trust_env=False,
            follow_redirects=False,
            headers={"Accept": "application/json"},
        )

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        deadline: float | None,
        idempotent: bool,
        **kwargs: Any,
    ) -> httpx.Response:
        """Send one logical request, retrying within ``deadline`` when that is safe.

        GETs (``idempotent``) retry on 5xx, connection errors and read
        timeouts; others retry only when nothing can have been sent.
        """
        attempt = 0
        while True:
            timeout = self._timeout(method, url, deadline)
            try:
                response = self._send(method, url, timeout, kwargs)
            except _SEND_ERRORS as exc:
                error = map_exception(exc, method, self._full(url), self.settings)
                if not (_retryable(exc, idempotent) and self._may_retry(attempt, deadline)):
                    raise error from exc
                log.debug("retrying %s %s after %s", method, url, type(exc).__name__)
            else:
                if not (response.status_code >= 500 and idempotent):
                    return response
                if not self._may_retry(attempt, deadline):
                    return response
                log.debug("retrying %s %s after HTTP %s", method, url, response.status_code)
            attempt += 1

    def _send(
        self, method: str, url: str, timeout: httpx.Timeout, kwargs: Mapping[str, Any]
    ) -> httpx.Response:
        self.request_count += 1
        return self._client.request(method, url, timeout=timeout, **kwargs)

    def _timeout(self, method: str, url: str, deadline: float | None) -> httpx.Timeout:
        connect, read = self.settings.connect_timeout_s, self.settings.read_timeout_s
        if deadline is not None:
            left = deadline - self.clock()
            if left <= 0:
                msg = f"{method} {self._full(url)}: no time left before the deadline; not sent"
                raise ZvmTimeout(msg)
            connect, read = min(connect, left), min(read, left)
        return httpx.Timeout(connect=connect, read=read, write=read, pool=connect)

    def _may_retry(self, attempt: int, deadline: float | None) -> bool:
        """Sleep before the next attempt if one is allowed and fits before the deadline."""
        if attempt >= self.retries:
            return False
        # Exponential backoff with full jitter around the nominal delay.
        delay = self.backoff_s * (2**attempt) * (0.5 + random.random())
        if deadline is not None and self.clock() + delay >= deadline:
            return False
        self.sleep(delay)
        return True

    def _full(self, url: str) -> str:
        return url if "://" in url else self.settings.url + url


def _retryable(exc: Exception, idempotent: bool) -> bool:
    if _ssl_cause(exc) is not None:
        return False  # a certificate problem will not fix itself
    # Nothing reached the server: the connection (or a pool slot) never came up.
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return True
    return idempotent and isinstance(
        exc, httpx.ReadTimeout | httpx.NetworkError | httpx.RemoteProtocolError
    )


def _ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def map_exception(
    exc: Exception, method: str, url: str, settings: object = None
) -> ZvmError | ConfigError:
    """Translate an httpx/ssl/OS exception raised while sending into the error tree.

    Hints name the key the config really has (``zvms.SITE.url`` for a site of an estate).
    """
    where = f"{method} {url}"
    tls = _ssl_cause(exc)
    if tls is not None:
        reason = getattr(tls, "verify_message", None) or getattr(tls, "reason", None) or str(tls)
        return ZvmTlsError(f"{where}: TLS failed ({reason}); {_ca_hint(settings)}")
    if isinstance(exc, ZvmError | ConfigError):
        return exc
    if isinstance(exc, httpx.TimeoutException):
        return ZvmTimeout(f"{where}: timed out ({type(exc).__name__}); is the ZVM overloaded?")
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ConfigError(f"{url} is not an https:// URL", key=_key(settings, "url"))
    if isinstance(exc, httpx.DecodingError | httpx.TooManyRedirects):
        return ApiError(f"{where}: {_BAD_BODY} ({exc})", method=method, url=url, status=None)
    if isinstance(exc, httpx.ProxyError):
        return ZvmConnectionError(f"{where}: proxy failed: {exc}")
    detail = str(exc) or type(exc).__name__
    return ZvmConnectionError(
        f"{where}: cannot reach the ZVM ({detail}); check {_key(settings, 'url')} and the network"
    )


def _message_of(body: str) -> str:
    """The human part of an error body: ``Message``/``error_description``, else an excerpt."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        for key in ("Message", "message", "error_description", "errorMessage", "error"):
            if isinstance(data.get(key), str) and data[key]:
                return str(data[key])[:BODY_EXCERPT]
    return " ".join(body.split())[:BODY_EXCERPT]


def api_error(response: httpx.Response, hint: str = "") -> ApiError:
    """An ApiError (NotFound for 404) describing a non-2xx ``response``."""
    method, url = response.request.method, str(response.request.url)
    body = response.text[:BODY_EXCERPT] if response.content else ""
    message = _message_of(body) if body else response.reason_phrase
    text = f"{method} {url} → HTTP {response.status_code}: {message}"
    cls = NotFound if response.status_code == 404 else ApiError
    return cls(
        text + (f"; {hint}" if hint else ""),
        method=method,
        url=url,
        status=response.status_code,
        body=body,
    )


def decode_json(response: httpx.Response) -> Any:
    """The JSON body of ``response``; ApiError if it is not JSON."""
    try:
        return json.loads(response.content) if response.content else None
    except ValueError as exc:
        raise bad_body(response, "not JSON") from exc


def bad_body(response: httpx.Response, detail: str) -> ApiError:
    """ApiError for a 2xx body that does not have the shape we expect."""
    method, url = response.request.method, str(response.request.url)
    excerpt = response.text[:BODY_EXCERPT] if response.content else ""
    msg = f"{method} {url}: {_BAD_BODY} ({detail}): {excerpt!r}"
    return ApiError(msg, method=method, url=url, status=response.status_code, body=excerpt)
