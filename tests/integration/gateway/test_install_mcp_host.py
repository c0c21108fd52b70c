"""`zerto-rewind install mcp-host` end to end: files rewritten, then the host entry really works.

HOME points at a temp dir. After the install, the gateway is started from the
resulting config exactly as the host entry says (stdio: its command and args;
HTTP: its URL and Authorization header) and a tool is called through it with
the official SDK's client; the stand-in VM server sits behind it.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from integration.gateway.gateway_helpers import actions, gateway_process, stand_in_upstream, text_of
from support.ports import free_port
from zerto_rewind.cli import run_command
from zerto_rewind.cli.doctor.gateway import doctor_bypass_checks
from zerto_rewind.cli.install_mcp_host import main
from zerto_rewind.config.loader import load_settings
from zerto_rewind.gateway.http import token_digest
from zerto_rewind.gateway.upstream_user import ALLOW_FLAG as ALLOW  # the stand-in runs as root
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

PASSWORD = "vc-Pa55word-never-in-the-host-file"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    with Sandbox(str(tmp_path / "box"), guard={"timeout_s": 10}) as sandbox:
        sandbox.write_config(state_dir=sandbox.state_dir, log=sandbox.log_path)
        yield sandbox


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def vm_entry(box: Sandbox, actions_log: Path) -> dict[str, Any]:
    """The stand-in vSphere server as a host would list it, vCenter password included."""
    spec = stand_in_upstream(box, actions_log)
    return {
        "command": spec["command"][0],
        "args": spec["command"][1:],
        "env": {**spec["env"], "VCENTER_USER": "administrator@vsphere.local"}
        | {"VCENTER_PASSWORD": PASSWORD},
    }


def run(argv: list[str], home: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "USER": "alice"}
    code = run_command("install mcp-host", lambda: main(argv, env))
    out, err = capsys.readouterr()
    return code, out, err


def host_env(box: Sandbox, entry: dict[str, Any]) -> dict[str, str]:
    """What a host gives a stdio server: its own environment plus the entry's env."""
    return {**box.env(), **entry.get("env", {})}


def gateway_upstream(box: Sandbox) -> dict[str, Any]:
    config = json.loads(Path(box.config_path).read_text())
    upstream: dict[str, Any] = config["upstreams"]["vsphere"]
    return upstream


async def test_claude_code_stdio_end_to_end(
    box: Sandbox,
    actions_log: Path,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """.mcp.json: the entry moves; the host's new entry starts the gateway; calls go through."""
    project = tmp_path / "proj"
    project.mkdir()
    unrelated = {"type": "stdio", "command": "npx", "args": ["-y", "@mcp/server-git"]}
    mcp_json = project / ".mcp.json"
    mcp_json.write_text(
        json.dumps({"mcpServers": {"vsphere": vm_entry(box, actions_log), "git": unrelated}})
    )
    argv = ["claude-code", "--server", "vsphere", "--project", str(project)]
    argv += ["--gateway-config", box.config_path]

    code, out, err = run([*argv, "--dry-run"], home, capsys)
    assert code == 0, err
    assert "dry run, nothing written" in out
    assert PASSWORD not in out
    assert PASSWORD in mcp_json.read_text()

    code, out, err = run(argv, home, capsys)
    assert code == 0, err
    assert PASSWORD not in out + err
    host = json.loads(mcp_json.read_text())
    assert PASSWORD not in mcp_json.read_text()
    assert host["mcpServers"]["git"] == unrelated
    entry = host["mcpServers"]["vsphere"]
    assert entry["command"] == os.path.abspath(sys.executable)
    assert entry["args"] == [
        "-m",
        "zerto_rewind",
        "gateway",
        "--stdio",
        "--upstream",
        "vsphere",
        "--config",
        box.config_path,
    ]
    upstream = gateway_upstream(box)
    assert upstream["env"]["VCENTER_PASSWORD"] == PASSWORD
    assert os.stat(box.config_path).st_mode & 0o777 == 0o600
    load_settings(box.env())  # still a valid config, upstream included
    backups = Path(box.config_path).parent / "host-backups"
    assert [p.name[:25] for p in backups.iterdir()] == ["claude-code-mcp.json.bak-"]
    assert sorted(os.listdir(project)) == [".mcp.json"]

    code, out, _ = run(argv, home, capsys)  # a second run finds it done
    assert code == 0
    assert "already reaches the gateway" in out

    params = StdioServerParameters(
        command=entry["command"], args=[*entry["args"], ALLOW], env=host_env(box, entry)
    )
    async with Client(params, cache=None) as c:
        listed = await c.call_tool("list_vms", {})
        assert not listed.is_error, text_of(listed)
        assert "jp-ubuntu" in text_of(listed)
        # a mutating call lands on the stand-in, started with the env that moved
        changed = await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
    assert not changed.is_error, text_of(changed)
    assert "a Zerto checkpoint protects this mcp__vsphere__power_off_vm call" in text_of(changed)
    assert [a["tool"] for a in actions(actions_log)] == ["power_off_vm"]

    checks = doctor_bypass_checks(
        {"HOME": str(home)}, project_dirs=[str(project)], settings=load_settings(box.env())
    )
    (read,) = [c for c in checks if str(mcp_json) in c.detail and c.detail.startswith("read")]
    assert read.status == "pass", read
    assert "vsphere: reaches upstream 'vsphere' through the gateway" in read.detail


async def test_codex_stdio_end_to_end(
    box: Sandbox,
    actions_log: Path,
    home: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """~/.codex/config.toml: the TOML table is rewritten; the rest of the file is kept."""
    entry = vm_entry(box, actions_log)
    env_lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in entry["env"].items())
    toml = (
        'model = "gpt-5-codex"\n\n'
        "[mcp_servers.vsphere]\n"
        f"command = {json.dumps(entry['command'])}\n"
        f"args = {json.dumps(entry['args'])}\n\n"
        f"[mcp_servers.vsphere.env]\n{env_lines}\n\n"
        '[mcp_servers.docs]\nurl = "https://docs.example.com/mcp"\n'
    )
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text(toml)
    code, _out, err = run(
        ["codex", "--server", "vsphere", "--user", "--gateway-config", box.config_path],
        home,
        capsys,
    )
    assert code == 0, err
    text = config.read_text()
    assert PASSWORD not in text
    data = tomllib.loads(text)
    assert data["model"] == "gpt-5-codex"
    assert data["mcp_servers"]["docs"] == {"url": "https://docs.example.com/mcp"}
    moved = data["mcp_servers"]["vsphere"]
    assert moved["tool_timeout_sec"] >= 10
    assert gateway_upstream(box)["env"]["VCENTER_PASSWORD"] == PASSWORD

    params = StdioServerParameters(
        command=moved["command"], args=[*moved["args"], ALLOW], env=host_env(box, moved)
    )
    async with Client(params, cache=None) as c:
        listed = await c.call_tool("list_vms", {})
    assert not listed.is_error, text_of(listed)
    assert "jp-ubuntu" in text_of(listed)


async def test_cursor_http_end_to_end(
    box: Sandbox,
    actions_log: Path,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """~/.cursor/mcp.json over HTTP: url + bearer header in the host file, digest in the gateway."""
    cursor = home / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text(json.dumps({"mcpServers": {"vsphere": vm_entry(box, actions_log)}}))
    port = free_port()
    argv = ["cursor", "--server", "vsphere", "--user", "--gateway-config", box.config_path]
    argv += ["--url", f"http://127.0.0.1:{port}", "--client", "ci-agent"]
    code, out, err = run(argv, home, capsys)
    assert code == 0, err
    (token,) = re.findall(r"shown once\): (\S+)", out)
    assert out.count(token) == 1  # printed once, nowhere else
    entry = json.loads(cursor.read_text())["mcpServers"]["vsphere"]
    assert entry == {
        "url": f"http://127.0.0.1:{port}/mcp/vsphere",
        "headers": {"Authorization": f"Bearer {token}"},
    }
    assert PASSWORD not in cursor.read_text()
    assert os.stat(cursor).st_mode & 0o077 == 0  # it holds a token now
    gateway_text = Path(box.config_path).read_text()
    assert token not in gateway_text
    assert json.loads(gateway_text)["gateway"]["clients"] == {"ci-agent": token_digest(token)}

    with gateway_process(box, tmp_path, listen=f"127.0.0.1:{port}") as gw:
        assert gw.endpoint("vsphere") == entry["url"]
        async with (
            httpx2.AsyncClient(headers=entry["headers"], timeout=30) as http,
            Client(streamable_http_client(entry["url"], http_client=http), cache=None) as c,
        ):
            listed = await c.call_tool("list_vms", {})
        assert not listed.is_error, text_of(listed)
        assert "jp-ubuntu" in text_of(listed)
        assert token not in gw.stderr.read_text()


def test_refusals_change_nothing(
    box: Sandbox,
    actions_log: Path,
    home: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A gateway config open to others, no such server, clear-text URL: refused, nothing changed."""
    project = tmp_path / "proj"
    (project / ".vscode").mkdir(parents=True)
    host_file = project / ".vscode" / "mcp.json"
    entry = {"type": "stdio", **vm_entry(box, actions_log)}
    host_file.write_text(json.dumps({"servers": {"vsphere": entry}}))
    before_host, before_gw = host_file.read_text(), Path(box.config_path).read_text()
    argv = ["vscode", "--project", str(project), "--gateway-config", box.config_path]

    code, _out, err = run([*argv, "--server", "vcenter"], home, capsys)
    assert code == 1
    assert "no MCP server named 'vcenter'" in err
    assert "servers: vsphere" in err

    os.chmod(box.config_path, 0o644)
    code, _out, err = run([*argv, "--server", "vsphere"], home, capsys)
    assert code == 1
    assert "readable or writable by others" in err
    assert PASSWORD not in err
    os.chmod(box.config_path, 0o600)

    code, _out, err = run(
        [*argv, "--server", "vsphere", "--url", "http://10.0.0.5:8750"], home, capsys
    )
    assert code == 1
    assert "clear text" in err
    assert (host_file.read_text(), Path(box.config_path).read_text()) == (before_host, before_gw)
    assert not (Path(box.config_path).parent / "host-backups").exists()
