"""The guard service's client: one request to `zerto-rewind gateway --socket` or `--listen`.

Every thin hook (Claude Code's, and the Codex, Gemini CLI and Copilot CLI hooks),
``install … --service`` and ``doctor`` ask the service through this one client:
:func:`ask_service` posts a hook payload to ``/v1/decide``, :func:`post_result` the
result of a call it let through to ``/v1/result``, :func:`request_json` is any
request whose answer is a JSON object.

Service URL: ``unix:/path/to/socket`` (a local service; the socket's owner and
mode decide who may ask) or ``https://host:port`` (a remote gateway, with a
bearer token read from ``token_file``).

Who answers on a unix socket is checked before anything is sent: the listener's
uid (``SO_PEERCRED``) must be ``service_user`` (a uid, or a name), the guard
service's own user. Anyone who can put a socket at the path (a writable
directory, or one created before the service starts) could otherwise answer
``allow``. No ``service_user``, a listener of another uid, or credentials that
cannot be read: :class:`ServiceIdentityError`, with who listened and who was
expected.

Also what every thin hook shares besides the request: :func:`parse_budget`, the
deny when the service gave no decision (:func:`undecided_reason`) and the timer
that answers before the budget (:func:`arm_deadline`).

A base module (``errors`` and ``_fastjson`` only), import-light as the hooks
need: a unix-socket request uses the built-in ``_socket`` and the C JSON
scanner; only an https service loads ``ssl`` and ``http.client``.
"""

from __future__ import annotations

import os
import sys

from . import _fastjson
from .errors import ZertoRewindError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
    from collections.abc import Callable
    from typing import Any
else:  # the C module, loaded at interpreter start; `signal` would import enum (~5 ms)
    import _signal

__all__ = [
    "ServiceError",
    "ServiceIdentityError",
    "arm_deadline",
    "ask_service",
    "check_peer",
    "disarm_deadline",
    "parse_budget",
    "post_result",
    "request",
    "request_json",
    "request_timeout_s",
    "undecided_reason",
]

# A hook's timer answers this long before its budget: room to write and exit.
DEADLINE_MARGIN_S = 0.3

_MAX_RESPONSE = 1024 * 1024


class ServiceError(ZertoRewindError):
    """The service could not give a decision; the reason is for the human."""


class ServiceIdentityError(ServiceError):
    """The listener on the unix socket is not (or cannot be shown to be) the guard service.

    ``advice`` is what an operator can do, for the hook's deny; the message alone
    is what install and doctor print.
    """

    def __init__(self, message: str, advice: str) -> None:
        super().__init__(message)
        self._advice = advice

    @property
    def advice(self) -> str:
        """What the operator can do; install and doctor print the message alone."""
        return self._advice


def ask_service(opts: dict[str, str], body: bytes, *, timeout_s: float) -> dict[str, Any]:
    """POST the payload to ``/v1/decide``; the service's decision as a dict."""
    answer = request_json(opts, "POST", "/v1/decide", body, timeout_s=timeout_s)
    if not isinstance(answer.get("outcome"), str):
        msg = "the service's answer has no outcome"
        raise ServiceError(msg)
    return answer


def post_result(opts: dict[str, str], body: bytes, *, timeout_s: float) -> None:
    """POST a call's result to ``/v1/result``; ServiceError (with the service's reason)
    when it is not recorded."""
    request_json(opts, "POST", "/v1/result", body, timeout_s=timeout_s)


def request_json(
    opts: dict[str, str], method: str, target: str, body: bytes = b"", *, timeout_s: float
) -> dict[str, Any]:
    """One request to the service (``opts``: service, service_user, token_file, ca_file); its JSON.

    The one HTTP client of the service, shared by the hook, ``install --service``
    and ``doctor``: ServiceError (for the human) when it cannot be reached, answers
    another status than 200, or answers something that is not a JSON object.
    """
    status, raw = request(opts, method, target, body, timeout_s=timeout_s)
    if status != 200:
        detail = _error_detail(raw)
        msg = f"the service answered HTTP {status}{detail}"
        raise ServiceError(msg)
    try:
        answer = _fastjson.loads(raw)
    except ValueError:
        msg = "the service's answer is not JSON"
        raise ServiceError(msg) from None
    if not isinstance(answer, dict):
        msg = "the service's answer is not a JSON object"
        raise ServiceError(msg)
    return answer


def request(
    opts: dict[str, str], method: str, target: str, body: bytes = b"", *, timeout_s: float
) -> tuple[int, bytes]:
    """(status, body) of ``METHOD target`` on the service named by ``opts["service"]``.

    On a unix socket, nothing is sent unless the listener runs as ``opts["service_user"]``
    (:class:`ServiceIdentityError` otherwise, and when that option is missing);
    ``opts["installer"]`` names the ``install`` target for its advice.
    """
    service = opts["service"]
    if service.startswith("unix:"):
        identity = (opts.get("service_user", ""), opts.get("installer", "claude-code"))
        return _request_unix(service[5:], method, target, body, timeout_s, identity)
    if service.startswith("https://"):
        return _request_https(service, method, target, body, opts, timeout_s)
    msg = f"the service URL {service!r} is neither unix:/path nor https://host:port"
    raise ServiceError(msg)


def _request_unix(
    path: str, method: str, target: str, body: bytes, timeout_s: float, identity: tuple[str, str]
) -> tuple[int, bytes]:
    import _socket

    head = (
        f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except OSError as exc:
            msg = f"cannot connect to its socket {path} ({exc.strerror or exc})"
            raise ServiceError(msg) from None
        check_peer(sock, path, *identity)  # before a byte of the call leaves
        try:
            sock.sendall(head + body)
            chunks = []
            size = 0
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > _MAX_RESPONSE:
                    msg = "its answer is too large"
                    raise ServiceError(msg)
                chunks.append(chunk)
        except TimeoutError:
            msg = f"no answer within {timeout_s:.1f} s"
            raise ServiceError(msg) from None
        except OSError as exc:
            msg = f"the connection failed ({exc.strerror or exc})"
            raise ServiceError(msg) from None
    finally:
        sock.close()
    return _parse_http(b"".join(chunks))


def check_peer(sock: Any, path: str, service_user: str, installer: str = "claude-code") -> None:
    """The listener's uid (``SO_PEERCRED``: struct ucred, 3 native ints) is ``service_user``'s.

    ``installer``: the ``install`` target that wrote the hook, for the advice.
    """
    import _socket

    if not service_user:
        msg = (
            "no service identity (--service-user) names the guard service's user, so the "
            f"service cannot be told from any other listener on {path}"
        )
        advice = (
            "The thin hook was installed without one; an operator must reinstall it: "
            f"zerto-rewind install {installer} --service unix:{path} … (it records the "
            "service's user)."
        )
        raise ServiceIdentityError(msg, advice)
    advice = "An operator can check the service's socket directory."
    try:
        expected = int(service_user) if service_user.isdigit() else _uid_of(service_user)
    except KeyError:
        msg = f"the hook's service user {service_user!r} is no user of this machine"
        raise ServiceIdentityError(msg, "An operator can check the hook's installation.") from None
    try:
        cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except (AttributeError, OSError) as exc:  # AttributeError: no SO_PEERCRED on this system
        msg = f"cannot read who serves the socket at {path} ({exc})"
        raise ServiceIdentityError(msg, advice) from None
    if len(cred) < 12:
        msg = f"cannot read who serves the socket at {path} (a short peer credential)"
        raise ServiceIdentityError(msg, advice)
    uid = int.from_bytes(cred[4:8], sys.byteorder)
    if uid != expected:
        pid = int.from_bytes(cred[0:4], sys.byteorder)
        msg = (
            f"the socket at {path} is served by uid {uid}{_named(uid, f', pid {pid}')}, not by "
            f"the guard service's user {_user_label(service_user, expected)}"
        )
        raise ServiceIdentityError(msg, advice)


def _uid_of(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid


def _named(uid: int, extra: str = "") -> str:
    """`` (alice, pid 42)`` for a uid the passwd database knows; `` (pid 42)`` otherwise."""
    import pwd

    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        return f" ({extra[2:]})" if extra else ""
    return f" ({name}{extra})"


def _user_label(service_user: str, uid: int) -> str:
    """``zerto (uid 998)`` for a name or a known uid, ``uid 998`` for an unknown one."""
    if not service_user.isdigit():
        return f"{service_user} (uid {uid})"
    import pwd

    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _parse_http(raw: bytes) -> tuple[int, bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    if not sep or len(status_line) < 2 or not status_line[1].isdigit():
        msg = "its answer is not an HTTP response"
        raise ServiceError(msg)
    headers = head.lower()
    if b"transfer-encoding: chunked" in headers:
        body = _unchunk(body)
    return int(status_line[1]), body


def _unchunk(body: bytes) -> bytes:
    out = []
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        body = rest[size + 2 :]
    return b"".join(out)


def _request_https(
    url: str, method: str, target: str, body: bytes, opts: dict[str, str], timeout_s: float
) -> tuple[int, bytes]:
    import http.client
    import ssl
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    context = ssl.create_default_context(cafile=opts.get("ca_file"))
    headers = {"Content-Type": "application/json"}
    token_file = opts.get("token_file")
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as fh:
                headers["Authorization"] = f"Bearer {fh.read().strip()}"
        except OSError as exc:
            msg = f"cannot read the token file {token_file} ({exc.strerror})"
            raise ServiceError(msg) from None
    conn = http.client.HTTPSConnection(
        parts.hostname or "", parts.port or 443, timeout=timeout_s, context=context
    )
    try:
        conn.request(method, parts.path.rstrip("/") + target, body=body or None, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(_MAX_RESPONSE)
    except TimeoutError:
        msg = f"no answer within {timeout_s:.1f} s"
        raise ServiceError(msg) from None
    except (OSError, http.client.HTTPException) as exc:
        msg = f"the connection failed ({type(exc).__name__}: {exc})"
        raise ServiceError(msg) from None
    finally:
        conn.close()


def _error_detail(raw: bytes) -> str:
    try:
        data = _fastjson.loads(raw)
    except ValueError:
        return ""
    return f" ({data['error']})" if isinstance(data, dict) and "error" in data else ""


# ------------------------------------------------------------ what every thin hook shares


def parse_budget(raw: str) -> float:
    """A hook's ``--budget``: a positive number of seconds; ValueError says what is wrong."""
    try:
        budget = float(raw)
        if budget <= 0:
            raise ValueError
    except ValueError:
        msg = f"--budget must be a positive number of seconds, not {raw!r}"
        raise ValueError(msg) from None
    return budget


def request_timeout_s(budget_s: float) -> float:
    """How long a hook waits for the service: its budget less the timer's margin and room to
    answer, so the service's own deny normally arrives before the timer's."""
    return max(0.2, budget_s - DEADLINE_MARGIN_S - 0.2)


def undecided_reason(tool: str, service: str, why: str) -> str:
    """A thin hook's deny when the service gave no decision: what failed, for the human."""
    return (
        f"zerto-rewind denied {tool}: the guard service ({service}) could not decide: {why}. "
        "The call was not run. An operator can check the service (zerto-rewind doctor, "
        "its /healthz)."
    )


def arm_deadline(budget_s: float, deny_text: Callable[[], str]) -> None:
    """SIGALRM prints ``deny_text()`` and exits just before the budget, whatever the socket
    is doing: the host's own timeout lets the call run, so the hook answers first."""

    def fire(signum: int, frame: object) -> None:
        sys.stdout.write(deny_text() + "\n")
        sys.stdout.flush()
        os._exit(0)

    _signal.signal(_signal.SIGALRM, fire)
    _signal.setitimer(_signal.ITIMER_REAL, max(0.05, budget_s - DEADLINE_MARGIN_S))


def disarm_deadline() -> None:
    """The decision is in: the timer must not answer too."""
    _signal.setitimer(_signal.ITIMER_REAL, 0)
