"""``install mcp-host``'s judgement of who will run the upstream, as the gateway would judge it.

The gateway's user is assumed to be the installer's: ``os.geteuid`` is set here so
that both a root and an unprivileged installer can be shown on one machine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from support.config import OFFLINE_ZVM, write_config
from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.install.mcp_host import McpHostOptions, _start_warnings


def warnings(tmp_path: Path, upstream: dict[str, Any], **flags: Any) -> list[str]:
    gateway = {"zvm": OFFLINE_ZVM, "upstreams": {"vsphere": upstream}}
    path = write_config(tmp_path, gateway, name="gateway.json")
    options = McpHostOptions(host="claude-code", server="vsphere", **flags)
    return _start_warnings(options, gateway, str(path), {})


def test_root_without_a_user_is_a_warning_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    (line,) = warnings(tmp_path, {"command": ["mcvsphere"]})
    assert line.startswith("WARNING:     the gateway will refuse to start 'vsphere' as written")
    assert "it would run as root" in line
    assert "--upstream-user NAME" in line
    assert "--allow-privileged-upstream" in line
    (note,) = warnings(tmp_path, {"command": ["mcvsphere"]}, allow_privileged_upstream=True)
    assert note.startswith("note:")
    assert "accepted by --allow-privileged-upstream" in note


def test_a_user_the_gateway_cannot_switch_to_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    (line,) = warnings(tmp_path, {"command": ["mcvsphere"], "user": "nobody"})
    assert "which cannot switch to nobody (uid 65534)" in line
    assert "Run the host (or the HTTP gateway) as root" in line


def test_no_warning_for_a_user_of_its_own_or_an_http_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert warnings(tmp_path, {"command": ["mcvsphere"], "user": "nobody"}) == []
    assert warnings(tmp_path, {"url": "https://vc-mcp.lab/mcp"}) == []


def test_an_unknown_user_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no user named 'zr-nobody-here'"):
        warnings(tmp_path, {"command": ["mcvsphere"], "user": "zr-nobody-here"})
