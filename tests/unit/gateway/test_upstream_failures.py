"""Why an upstream is down, as the gateway says it (gateway/upstream.py).

The cause inside the SDK's nested exception groups, not the group's name; the
launcher's own line when it wrote one; once per change on the gateway's log, not
per retry; and ``/healthz``'s text with the upstream's log path. A real failing
server is in tests/integration/gateway/test_upstream_startup.py.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from zerto_rewind.config.settings import UpstreamSettings
from zerto_rewind.gateway.upstream import Upstream, _describe

LOG = "/var/lib/zerto-rewind/upstreams/vsphere.log"


def upstream(**spec: object) -> Upstream:
    u = Upstream(UpstreamSettings(name="vsphere", **({"command": ["mcvsphere"]} | spec)))  # type: ignore[arg-type]
    u.log_path = LOG
    return u


def test_the_cause_is_taken_out_of_nested_groups_past_cancellations() -> None:
    cause = ConnectionError("Connection closed")
    cancelled = asyncio.CancelledError()
    group = BaseExceptionGroup("outer", [cancelled, ExceptionGroup("inner", [cause])])
    assert _describe(group) == "ConnectionError: Connection closed"
    assert _describe(ExceptionGroup("g", [RuntimeError()])) == "RuntimeError"


def test_each_cause_is_logged_once_until_it_changes(caplog: pytest.LogCaptureFixture) -> None:
    u = upstream()
    caplog.set_level(logging.DEBUG, logger="zerto_rewind.gateway")
    lost = ExceptionGroup("unhandled errors in a TaskGroup", [ConnectionError("Connection closed")])
    for _ in range(5):
        u._failed(lost)
    u._launcher_said = "cannot run /opt/x/python: Permission denied (as user zr: /root is ...)"
    u._failed(lost)
    u._failed(lost)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        f"upstream vsphere is down: ConnectionError: Connection closed; its log: {LOG}",
        "upstream vsphere is down: cannot run /opt/x/python: Permission denied "
        f"(as user zr: /root is ...); its log: {LOG}",
    ]
    assert not any("ExceptionGroup" in r.getMessage() for r in caplog.records)
    caplog.clear()
    u._recovered()
    u._failed(lost)
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert messages[0] == "upstream vsphere: connected again"
    assert messages[1].startswith("upstream vsphere is down: cannot run /opt/x/python")


def test_healthz_text_names_the_cause_and_the_log() -> None:
    u = upstream()
    assert u.health() == f"not connected (starting; its log: {LOG})"
    u._failed(OSError(2, "No such file or directory"))
    assert u.health() == (
        f"not connected (FileNotFoundError: [Errno 2] No such file or directory; its log: {LOG})"
    )
    http = upstream(command=None, url="http://127.0.0.1:9/mcp")
    http._failed(ConnectionRefusedError("refused"))
    assert http.health() == "not connected (ConnectionRefusedError: refused)"
