"""What an ``install`` did: lines for a person as they happen, or one JSON object at the end.

Every install target (``claude-code``, ``claude-plugin``, ``mcp-host``, ``host-hook``)
tells its story through an :class:`InstallReport`. In text mode each line is printed
when it is said, as the installers always did (a dry run's summary on stderr). With
``--json`` nothing is printed until :meth:`InstallReport.finish`, which writes one
object on stdout::

    {"target": "claude-code", "outcome": "installed" | "unchanged" | "dry-run",
     "written": [paths written], "backups": [their backups],
     "would_write": [paths a dry run would write], "details": [the summary lines],
     "preview": {path: text a dry run would write}}

(``mcp-host`` over HTTP adds ``"token"``: the client's bearer token, shown once, as
the text output shows it.)
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["InstallReport"]


class InstallReport:
    """One install's account; see the module docstring."""

    def __init__(self, target: str, *, as_json: bool = False) -> None:
        self.target = target
        self.as_json = as_json
        self.outcome = "installed"
        self.written: list[str] = []
        self.backups: list[str] = []
        self.would_write: list[str] = []
        self.details: list[str] = []
        self.preview: dict[str, str] = {}
        self.extra: dict[str, Any] = {}

    def say(self, lines: list[str] | tuple[str, ...], *, err: bool = False) -> None:
        """Lines for the person (text mode: printed now, on stderr with ``err``)."""
        if self.as_json:
            self.details += lines
        elif lines:
            print("\n".join(lines), file=sys.stderr if err else sys.stdout)

    def wrote(self, path: str, backup: str | None = None) -> None:
        """``path`` was written (and ``backup`` keeps what it held before)."""
        self.written.append(path)
        if backup:
            self.backups.append(backup)

    def dry_run(self, path: str, text: str | None) -> None:
        """A dry run would write ``text`` to ``path`` (text mode: the text on stdout now)."""
        self.outcome = "dry-run"
        self.would_write.append(path)
        if self.as_json:
            if text is not None:
                self.preview[path] = text
        elif text:
            sys.stdout.write(text)

    def finish(self) -> None:
        """With ``--json``, print the one object; in text mode all is said already."""
        if not self.as_json:
            return
        body = {
            "target": self.target,
            "outcome": self.outcome,
            "written": self.written,
            "backups": self.backups,
            "would_write": self.would_write,
            "details": self.details,
            "preview": self.preview,
            **self.extra,
        }
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
