"""A stdio upstream's stderr, redacted line by line into its own log file.

The SDK's stdio client hands ``errlog`` to the child process as its stderr, so
it must be a real file descriptor: a pipe, whose far end a thread reads line
by line, redacts, and appends to the upstream's log (``0600``, in a ``0700``
directory). Tracebacks there may quote tool arguments; the gateway's own
stderr never sees them.

Redacted: the secret values of the upstream's ``env`` (:func:`secret_values`:
every variable but those whose name says they hold a user name, host, port,
URL, path or switch; values shorter than four characters and plain booleans
are left, they would blank the log without hiding a secret), each only as a
whole token, so a secret ``user`` leaves ``/home/newuser`` alone; and what
looks like a secret: ``password=…`` / ``token: …`` style pairs, ``Bearer …``
and the password in ``scheme://user:password@host``.

The launcher's own line (``zerto-rewind upstream launcher: cannot run …``) is
kept as :attr:`UpstreamLog.launcher_said` too: it names paths and a user, never
an argument, so the gateway may repeat it on its own stderr and in ``/healthz``.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import IO, TextIO

from ..redaction import whole_tokens
from .confine import LAUNCHER_PREFIX

__all__ = ["REDACTED", "Redactor", "UpstreamLog", "secret_values"]

REDACTED = "[redacted]"
_MAX_LINE = 16_384
_JOIN_S = 2.0
_PLAIN = frozenset({"true", "false", "yes", "no", "none", "null", "on", "off"})
_PAIRS = re.compile(
    r"(?i)\b([\w.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|credential|auth)[\w.-]*"
    r"['\"]?\s*[=:]\s*['\"]?)(?!(?:bearer|basic)\s)([^\s'\",;&]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_USERINFO = re.compile(r"(://[^/\s:@]+:)[^/\s@]+@")
# A variable named like these holds no secret: the log keeps its value readable.
# Anything else (a password, a key, a name we do not know) is treated as secret.
_NOT_SECRET = re.compile(
    r"(?i)(?:^|_)(?:user|username|login|host|hostname|server|port|url|uri|endpoint"
    r"|path|dir|file|level|insecure|verify|debug|timeout|mode|datacenter|cluster)$"
)


def secret_values(env: Mapping[str, str]) -> list[str]:
    """The values of ``env`` to redact: all but those of variables named as non-secret.

    ``VCENTER_USER=user`` is a user name, shown in the log; ``VCENTER_PASSWORD`` and
    any variable whose name does not say what it holds are secrets.
    """
    return [value for name, value in env.items() if not _NOT_SECRET.search(name)]


class Redactor:
    """Redacts one line of text: the given secret values, then secret-looking patterns."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = whole_tokens(s for s in secrets if len(s) >= 4 and s.lower() not in _PLAIN)

    def __call__(self, line: str) -> str:
        if self._secrets is not None:
            line = self._secrets.sub(REDACTED, line)
        line = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", line)
        line = _PAIRS.sub(lambda m: m.group(1) + REDACTED, line)
        return _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", line)


class UpstreamLog:
    """Context manager: ``sink`` is the child's stderr; lines land redacted in ``path``.

    With ``path`` None the child's stderr is discarded (never the gateway's own).
    """

    def __init__(self, path: str | None, secrets: Iterable[str]) -> None:
        self.path = path
        self.redact = Redactor(secrets)
        self.sink: TextIO
        self._thread: threading.Thread | None = None
        self.launcher_said: str | None = None  # the launcher's refusal, if it wrote one

    def __enter__(self) -> UpstreamLog:
        if self.path is None:
            self.sink = open(os.devnull, "w")  # closed in __exit__
            return self
        out = _open_private(self.path)
        read_fd, write_fd = os.pipe()
        self.sink = os.fdopen(write_fd, "w")
        source = os.fdopen(read_fd, "rb")
        self._thread = threading.Thread(
            target=self._copy, args=(source, out), name="zerto-rewind-upstream-log", daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sink.close()  # the child has exited by now: the reader sees end of file
        if self._thread is not None:
            # A grandchild that kept the pipe open must not hold the gateway up.
            self._thread.join(_JOIN_S)

    def _copy(self, source: IO[bytes], out: IO[str]) -> None:
        with source, out:
            while True:
                raw = source.readline(_MAX_LINE)
                if not raw:
                    return
                line = self.redact(raw.decode("utf-8", errors="replace").rstrip("\n"))
                if line.startswith(LAUNCHER_PREFIX):
                    self.launcher_said = line.removeprefix(LAUNCHER_PREFIX)
                out.write(line + "\n")
                out.flush()


def _open_private(path: str) -> IO[str]:
    """Append to ``path``, created ``0600`` in a ``0700`` directory; the mode is enforced."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o600)
    return os.fdopen(fd, "a", encoding="utf-8")
