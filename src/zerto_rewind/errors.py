"""The error tree of zerto-rewind.

Every error the library raises is one of these; foreign exceptions (httpx, ssl,
json, OSError) are mapped at the boundary where they occur and never escape::

    ZertoRewindError
    ├── ConfigError            the config file or environment is wrong
    ├── StateError             the state directory cannot be used
    ├── UsageError             an argument names nothing that exists, or is ambiguous
    ├── RecoveryError          live recovery refused (disabled, wrong confirm) or its task failed
    └── ZvmError               talking to the ZVM failed
        ├── ZvmConnectionError can't connect / connection dropped
        │   └── ZvmTlsError    certificate verification or TLS handshake failed
        ├── ZvmTimeout         no answer before the deadline
        ├── AuthError          token endpoint refused the credentials, or 401 twice
        ├── ApiError           the ZVM answered with an error status or a body we can't read
        │   └── NotFound       404, or a lookup that found nothing
        └── AmbiguousVm        a VM name matches several VMs and the caller needs one

Messages say what failed, where (method, URL, status) and what to do.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousVm",
    "ApiError",
    "AuthError",
    "ConfigError",
    "NotFound",
    "RecoveryError",
    "StateError",
    "UsageError",
    "ZertoRewindError",
    "ZvmConnectionError",
    "ZvmError",
    "ZvmTimeout",
    "ZvmTlsError",
]


class ZertoRewindError(Exception):
    """Base of every error zerto-rewind raises; its message is shown to users."""


class ConfigError(ZertoRewindError):
    """The configuration is missing or invalid.

    ``path`` names the file (or ``None`` for the environment), ``key`` the
    dotted key that is wrong, if one is.
    """

    def __init__(self, message: str, *, path: str | None = None, key: str | None = None) -> None:
        where = path or "environment"
        prefix = f"{where}: {key}: " if key else f"{where}: "
        super().__init__(prefix + message)
        self.path = path
        self.key = key
        self.detail = message

    @property
    def summary(self) -> str:
        """File, key and problem without the advice after it (``; do this``): what a deny
        reason quotes. The advice is for the operator, who gets it from ``doctor``."""
        where = self.path or "environment"
        problem = self.detail.split("; ", 1)[0]
        return f"{where}: {self.key}: {problem}" if self.key else f"{where}: {problem}"


class StateError(ZertoRewindError):
    """The state directory (token cache, pending tags, locks) cannot be used."""


class UsageError(ZertoRewindError):
    """Raised when an argument names nothing that exists or is ambiguous; lists the choices."""


class RecoveryError(ZertoRewindError):
    """Raised when a recovery is refused (not enabled, wrong confirm) or its ZVM task failed."""


class ZvmError(ZertoRewindError):
    """Talking to the Zerto Virtual Manager failed."""


class ZvmConnectionError(ZvmError):
    """The ZVM could not be reached, or the connection dropped mid-request."""


class ZvmTlsError(ZvmConnectionError):
    """TLS failed: usually an untrusted certificate (set ``zvm.ca_bundle``)."""


class ZvmTimeout(ZvmError):
    """The ZVM did not answer before the deadline."""


class AuthError(ZvmError):
    """The ZVM's Keycloak refused the credentials, or kept answering 401."""


class ApiError(ZvmError):
    """The ZVM answered with an error status, or with a body we cannot read."""

    def __init__(
        self, message: str, *, method: str, url: str, status: int | None, body: str = ""
    ) -> None:
        super().__init__(message)
        self.method = method
        self.url = url
        self.status = status
        self.body = body


class NotFound(ApiError):
    """The ZVM answered 404, or a lookup found nothing."""


class AmbiguousVm(ZvmError):
    """A VM name matched several VMs where exactly one was needed."""
