"""The error tree of zerto-rewind.

Every error the package raises is one of these; foreign exceptions (httpx, ssl,
json, OSError) are mapped at the boundary where they occur and never escape.
Classes defined in a higher layer (they belong to it, and ``errors`` imports
nothing) are drawn here with their module, relative to ``zerto_rewind``; a class
drawn without one is defined here::

    ZertoRewindError
    ├── ConfigError            the config file or environment is wrong
    │   └── ConfigChanged      the config no longer matches its pin (config.loader)
    ├── StateError             the state directory cannot be used
    │   └── KeyFileError       a key file is unreadable, or others may read it
    ├── UsageError             an argument names nothing that exists, or is ambiguous
    │   └── InstallRefused     install refused, nothing written (hostconfig.install.plan)
    ├── RecoveryError          live recovery refused (disabled, wrong confirm) or its task failed
    ├── ZvmError               talking to the ZVM failed
    │   ├── ZvmConnectionError can't connect / connection dropped
    │   │   └── ZvmTlsError    certificate verification or TLS handshake failed
    │   ├── ZvmTimeout         no answer before the deadline
    │   ├── AuthError          token endpoint refused the credentials, or 401 twice
    │   ├── ApiError           the ZVM answered with an error status or a body we can't read
    │   │   └── NotFound       404, or a lookup that found nothing
    │   └── AmbiguousVm        a VM name matches several VMs and the caller needs one
    ├── ApprovalError          an approval cannot be given or recorded (core.approvals_model)
    │   └── ApprovalLimitError  a caller or the store is at its request cap (core.approvals_model)
    ├── ScanError              a server's tools/list could not be read (scan.client)
    ├── UpstreamError          a VM MCP server behind the gateway failed (gateway.upstream)
    ├── LaneClosedError        a stdio server's pipes closed on the fast lane (gateway.stdio_tap)
    ├── ServiceError           the guard service gave no decision (service_client)
    │   └── ServiceIdentityError  the socket's listener is not the service (service_client)
    ├── HookInputError         stdin is not the host's pre-tool payload (a ValueError)
    ├── ApprovalsCliError      the approvals socket refused or failed (cli.approvals_cmd)
    ├── SimError               an HTTP error the simulator answers with (sim.errors)
    └── EstateError            an estate file the simulator cannot use (sim.estate; a ValueError)

A few exceptions never leave the module that raises them and are caught there;
they stay outside the tree on purpose: ``_fastjson.JSONDecodeError`` (stands in
for :class:`json.JSONDecodeError`, mapped by its callers), ``_FormError``
(gateway.approvals_web, turned into an HTTP answer), ``_Invalid`` (core.log_index:
an index to rebuild) and ``StrictJsonError`` (gateway.fastlane_wire, a ValueError:
a body the fast lane will not read goes the full path). ``tests/unit/test_errors.py``
holds that list and checks the tree against this drawing.

A message says what failed, where (file and key; method, URL, status) and then,
after the first ``"; "``, what to do: ``"zvm.url: missing; set ZVM_URL"``.
:attr:`ZertoRewindError.problem` and :attr:`ZertoRewindError.advice` split it
there, and :func:`describe` renders it the one way every edge shows an error
to a person: ``Type: what failed — what to do``. Write the advice wherever the
fix is knowable; leave it out rather than guess.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousVm",
    "ApiError",
    "AuthError",
    "ConfigError",
    "HookInputError",
    "KeyFileError",
    "NotFound",
    "RecoveryError",
    "StateError",
    "UsageError",
    "ZertoRewindError",
    "ZvmConnectionError",
    "ZvmError",
    "ZvmTimeout",
    "ZvmTlsError",
    "describe",
]


class ZertoRewindError(Exception):
    """Base of every error zerto-rewind raises; its message is shown to users.

    The message is ``what failed; what to do``, the advice after the first ``"; "``.
    """

    @property
    def problem(self) -> str:
        """What failed: the message up to its advice."""
        return str(self).split("; ", 1)[0]

    @property
    def advice(self) -> str:
        """What to do about it (after the first ``"; "``), or ``""`` if the message has none."""
        _problem, _sep, advice = str(self).partition("; ")
        return advice


def describe(error: ZertoRewindError) -> str:
    """``Type: what failed — what to do`` (or ``Type: what failed``), as every edge shows it."""
    advice = error.advice
    text = f"{error.problem} — {advice}" if advice else error.problem
    return f"{type(error).__name__}: {text}"


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


class KeyFileError(StateError):
    """A secret key file is missing, unreadable, or readable by someone other than its owner."""


class UsageError(ZertoRewindError):
    """Raised when an argument names nothing that exists or is ambiguous; lists the choices."""


class HookInputError(ZertoRewindError, ValueError):
    """Stdin is not the host's pre-tool payload; each hook answers its host's blocking error.

    Still a ValueError, as it always was, for callers that parse with ``except ValueError``.
    """


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
