"""The gateway's start command and systemd unit (hostconfig/gateway_unit.py).

The install that prints and writes them, and a gateway started with the printed
command, are in tests/integration/gateway/test_install_next_step.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.gateway_unit import gateway_command, gateway_unit, write_unit

PY = "/opt/zerto-rewind/bin/python"
CFG = "/etc/zerto-rewind/config.json"


@pytest.mark.parametrize(
    ("url", "listen"),
    [
        ("http://127.0.0.1:8750/mcp/vsphere", "127.0.0.1:8750"),
        ("https://gw.example:9443", "gw.example:9443"),
        ("https://gw.example", "gw.example:443"),
        ("http://[::1]:8750/mcp/vsphere", "[::1]:8750"),
    ],
)
def test_the_listen_address_comes_from_the_hosts_url(url: str, listen: str) -> None:
    assert gateway_command(PY, url, CFG) == [
        PY, "-m", "zerto_rewind", "gateway", "--listen", listen, "--config", CFG,
    ]  # fmt: skip


def test_a_root_unit_bounds_its_capabilities_and_a_user_unit_names_its_user() -> None:
    command = gateway_command(PY, "http://127.0.0.1:8750", CFG)
    root = gateway_unit(command, config=CFG, user=None, writable=["/var/lib/zr", "/var/log/zr"])
    lines = root.splitlines()
    assert "CapabilityBoundingSet=" + " ".join(
        ["CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_FOWNER", "CAP_DAC_OVERRIDE", "CAP_KILL",
         "CAP_NET_BIND_SERVICE"]
    ) in lines  # fmt: skip
    assert not any(line.startswith("User=") for line in lines)
    assert f"ExecStart={PY} -m zerto_rewind gateway --listen 127.0.0.1:8750 --config {CFG}" in lines
    assert "ReadWritePaths=-/var/lib/zr -/var/log/zr" in lines
    for setting in ("LimitNOFILE=65536", "NoNewPrivileges=yes", "ProtectSystem=strict",
                    "ProtectHome=read-only", "PrivateTmp=yes", "UMask=0077"):  # fmt: skip
        assert setting in lines
    user = gateway_unit(command, config=CFG, user="root", writable=[]).splitlines()
    assert "User=root" in user
    assert "Group=root" in user
    assert not any(line.startswith("CapabilityBoundingSet") for line in user)


def test_write_refuses_a_different_file_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "gw.service"
    assert write_unit(str(path), "A\n", force=False) == "written"
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert write_unit(str(path), "A\n", force=False) == "unchanged"
    with pytest.raises(ConfigError, match="a different file is there already"):
        write_unit(str(path), "B\n", force=False)
    assert path.read_text() == "A\n"
    assert write_unit(str(path), "B\n", force=True) == "written"
    assert path.read_text() == "B\n"
    with pytest.raises(ConfigError, match="no directory"):
        write_unit(str(tmp_path / "nodir" / "gw.service"), "A\n", force=False)
