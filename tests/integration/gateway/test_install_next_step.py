"""After `install mcp-host --url`: the printed command starts the gateway, the unit runs it,
and `doctor` reaches the gateway with the host's own URL and token.

The gateway is started with exactly the command the install printed (plus a ready
file, and the allowance the install's warning asks for: the stand-in runs as root
here); doctor's health check then reads the host file the install wrote.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import stand_in_upstream
from support.ports import free_port
from zerto_rewind.cli import run_command
from zerto_rewind.cli.doctor.gateway_health import gateway_health_checks
from zerto_rewind.cli.install_mcp_host import main
from zerto_rewind.gateway.upstream_user import ALLOW_FLAG
from zerto_rewind.hostconfig.specs import HOSTS, HostFile
from zerto_rewind.testing import Sandbox


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        sandbox.write_config(state_dir=sandbox.state_dir, log=sandbox.log_path)
        yield sandbox


@pytest.fixture
def home(tmp_path: Path, box: Sandbox, actions_log: Path) -> Path:
    """A home whose Cursor config lists the stand-in VM server directly."""
    spec = stand_in_upstream(box, actions_log)
    entry = {"command": spec["command"][0], "args": spec["command"][1:], "env": spec["env"]}
    cursor = tmp_path / "home" / ".cursor" / "mcp.json"
    cursor.parent.mkdir(parents=True)
    cursor.write_text(json.dumps({"mcpServers": {"vsphere": entry}}))
    return tmp_path / "home"


def install(home: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "USER": "alice"}
    argv = ("cursor", "--server", "vsphere", "--user", *argv)
    code = run_command("install mcp-host", lambda: main(list(argv), env))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_printed_command_starts_the_gateway_and_doctor_reaches_it(
    box: Sandbox, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()
    unit = tmp_path / "zerto-rewind-gateway.service"
    code, out, err = install(
        home, "--gateway-config", box.config_path, "--url", f"http://127.0.0.1:{port}",
        "--systemd-unit", str(unit), capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    (start,) = re.findall(r"^start:\s+(.*)$", out, re.MULTILINE)
    python = os.path.abspath(sys.executable)
    expected = [python, "-m", "zerto_rewind", "gateway", "--listen", f"127.0.0.1:{port}",
                "--config", box.config_path]  # fmt: skip
    assert shlex.split(start) == expected
    assert f"unit:        {unit} written; then: systemctl daemon-reload" in out
    assert f"then:        zerto-rewind doctor --config {box.config_path}" in out

    text = unit.read_text()
    assert f"ExecStart={shlex.join(expected)}\n" in text
    assert f"Environment=ZERTO_REWIND_CONFIG={box.config_path}\n" in text
    for line in ("LimitNOFILE=65536", "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "PrivateTmp=yes", "Restart=on-failure"):  # fmt: skip
        assert f"\n{line}\n" in text
    assert f"-{box.state_dir}" in text.split("ReadWritePaths=")[1].splitlines()[0]
    assert os.stat(unit).st_mode & 0o777 == 0o644
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(
            ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
        )
        assert "Unknown key" not in verified.stderr, verified.stderr
        assert "Invalid" not in verified.stderr, verified.stderr

    ready = tmp_path / "ready.json"
    proc = subprocess.Popen(
        [*expected, "--ready-file", str(ready), ALLOW_FLAG],
        env=box.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, "the printed command did not start a gateway"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        cursor = HostFile(HOSTS["cursor"], str(home / ".cursor" / "mcp.json"))
        deadline = time.monotonic() + 30
        while (check := gateway_health_checks([cursor])[0]).status != "pass":
            assert time.monotonic() < deadline, check.detail
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(10)
    assert check.name == f"gateway http://127.0.0.1:{port}"
    assert "the gateway is ready" in check.detail


def test_a_different_unit_file_is_kept_and_nothing_is_written(
    box: Sandbox, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = tmp_path / "gateway.service"
    unit.write_text("[Service]\nExecStart=/usr/bin/something-else\n")
    cursor = home / ".cursor" / "mcp.json"
    before = (cursor.read_text(), Path(box.config_path).read_text())
    url = f"http://127.0.0.1:{free_port()}"
    argv = ("--gateway-config", box.config_path, "--url", url, "--systemd-unit", str(unit))
    code, _out, err = install(home, *argv, capsys=capsys)
    assert code != 0
    assert "a different file is there already, and it is kept" in err
    assert "--force" in err
    assert unit.read_text() == "[Service]\nExecStart=/usr/bin/something-else\n"
    assert (cursor.read_text(), Path(box.config_path).read_text()) == before
    code, out, err = install(home, *argv, "--force", capsys=capsys)
    assert code == 0, err
    assert (
        f"ExecStart={os.path.abspath(sys.executable)} -m zerto_rewind gateway" in unit.read_text()
    )
    assert f"unit:        {unit} written" in out


def test_a_unit_needs_the_http_gateway(
    box: Sandbox, home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("--gateway-config", box.config_path, "--systemd-unit", str(tmp_path / "u.service"))
    code, _out, err = install(home, *argv, capsys=capsys)
    assert code != 0
    assert "--systemd-unit is for an HTTP gateway (--url)" in err
    assert not (tmp_path / "u.service").exists()


def test_a_stdio_install_says_the_host_starts_the_gateway(
    box: Sandbox, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = install(home, "--gateway-config", box.config_path, ALLOW_FLAG, capsys=capsys)
    assert code == 0, err
    (start,) = re.findall(r"^start:\s+(.*)$", out, re.MULTILINE)
    assert start.startswith("the host starts the gateway itself: ")
    command = shlex.split(start.removeprefix("the host starts the gateway itself: "))
    entry = json.loads((home / ".cursor" / "mcp.json").read_text())["mcpServers"]["vsphere"]
    assert command == [entry["command"], *entry["args"]]
