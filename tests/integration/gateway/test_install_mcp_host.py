"""`zerto-rewind install mcp-host` end to end: files rewritten, then the host entry really works.

HOME points at a temp dir. After the install, the gateway is started from the
resulting config exactly as the host entry says (stdio: its command and args;
HTTP: its URL and Authorization header) and a tool is called through it with
the official SDK's client; the stand-in VM server sits behind it.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shlex
import subprocess
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
from support.users import reachable_command
from zerto_rewind.cli import run_command
from zerto_rewind.cli.doctor.gateway import doctor_bypass_checks
from zerto_rewind.cli.install_mcp_host import main
from zerto_rewind.config.loader import load_settings
from zerto_rewind.gateway.http import token_digest
from zerto_rewind.gateway.upstream_user import ALLOW_FLAG as ALLOW  # the stand-in runs as root
from zerto_rewind.hostconfig.formats import parse_jsonc
from zerto_rewind.hostconfig.specs import HOSTS
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


def cli(*argv: str, home: Path, stage: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``zerto-rewind install mcp-host ARGV`` as its own process, HOME in a temp dir.

    ``stage``: in a mount namespace where other users reach this checkout's Python
    (:func:`support.users.reachable_command`), so the trial start as the upstream's
    user can succeed.
    """
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", ""), "USER": "alice"}
    command = [sys.executable, "-m", "zerto_rewind", "install", "mcp-host", *argv]
    return subprocess.run(
        command if stage is None else reachable_command(command, stage=stage),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


async def list_through(box: Sandbox, entry: dict[str, Any], *extra: str) -> str:
    """Start the gateway exactly as the stdio host entry says; call list_vms through it."""
    params = StdioServerParameters(
        command=entry["command"], args=[*entry["args"], *extra], env=host_env(box, entry)
    )
    async with Client(params, cache=None) as c:
        listed = await c.call_tool("list_vms", {})
    assert not listed.is_error, text_of(listed)
    return text_of(listed)


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
    assert moved["required"] is True  # Codex must not start the session without it
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


# Gemini CLI keeps its auth, hooks and more in the same settings.json, comments allowed.
GEMINI_TEXT = """{
  // written by hand: the auth the CLI needs offline
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "hooks": {"BeforeTool": []},
  /* the servers */
  "mcpServers": {
    "vsphere": @ENTRY@,
    "docs": {"httpUrl": "https://docs.example.com/mcp", "timeout": 5000},
  },
}
"""


async def test_gemini_stdio_through_the_cli(box: Sandbox, actions_log: Path, home: Path) -> None:
    """~/.gemini/settings.json: the entry moves; comments and every other key stay."""
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    entry = {**vm_entry(box, actions_log), "trust": False, "timeout": 30000}
    settings.write_text(GEMINI_TEXT.replace("@ENTRY@", json.dumps(entry)))
    done = cli("gemini", "--server", "vsphere", "--user", "--gateway-config", box.config_path,
               home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert PASSWORD not in done.stdout + done.stderr
    text = settings.read_text()
    assert PASSWORD not in text
    kept = [
        "// written by hand: the auth the CLI needs offline",
        "/* the servers */",
        '"security": {"auth": {"selectedType": "gemini-api-key"}}',
        '"hooks": {"BeforeTool": []}',
        '"docs": {"httpUrl": "https://docs.example.com/mcp", "timeout": 5000},',
    ]
    for line in kept:
        assert line in text
    assert "comments were dropped" not in done.stdout
    moved = parse_jsonc(text)["mcpServers"]["vsphere"]
    assert moved["command"] == os.path.abspath(sys.executable)
    assert shlex.join(moved["args"][:6]) == "-m zerto_rewind gateway --stdio --upstream vsphere"
    assert (moved["trust"], moved["timeout"]) == (False, 30000)  # the host's knobs stay
    assert "type" not in moved  # Gemini tells stdio by command
    assert gateway_upstream(box)["env"]["VCENTER_PASSWORD"] == PASSWORD
    # root runs this test: the gateway would refuse the upstream, and the install says so
    assert "WARNING:     the gateway will refuse to start 'vsphere'" in done.stderr
    assert "--upstream-user NAME" in done.stderr
    assert "jp-ubuntu" in await list_through(box, moved, ALLOW)


def test_gemini_http_entry_is_httpurl(box: Sandbox, actions_log: Path, home: Path) -> None:
    """--url: Gemini's streamable-HTTP key is httpUrl (its url is SSE), headers beside it."""
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"mcpServers": {"vsphere": vm_entry(box, actions_log)}}))
    port = free_port()
    done = cli("gemini", "--server", "vsphere", "--user", "--gateway-config", box.config_path,
               "--url", f"http://127.0.0.1:{port}", home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (token,) = re.findall(r"shown once\): (\S+)", done.stdout)
    entry = json.loads(settings.read_text())["mcpServers"]["vsphere"]
    assert entry == {
        "httpUrl": f"http://127.0.0.1:{port}/mcp/vsphere",
        "headers": {"Authorization": f"Bearer {token}"},
    }


async def test_copilot_local_through_the_cli(box: Sandbox, actions_log: Path, home: Path) -> None:
    """~/.copilot/mcp-config.json: a type-local server moves; the gateway entry is local too."""
    config = home / ".copilot" / "mcp-config.json"
    config.parent.mkdir()
    entry = {"type": "local", **vm_entry(box, actions_log), "tools": ["*"]}
    other = {"type": "http", "url": "https://api.example.com/mcp", "tools": ["search"]}
    config.write_text(json.dumps({"mcpServers": {"vsphere": entry, "search": other}}, indent=2))
    done = cli("copilot", "--server", "vsphere", "--gateway-config", box.config_path, ALLOW,
               home=home)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    assert f"it would run as root (root (uid 0)), who can read and change every file; " \
        f"accepted by {ALLOW}" in done.stdout  # fmt: skip
    data = json.loads(config.read_text())
    assert data["mcpServers"]["search"] == other
    moved = data["mcpServers"]["vsphere"]
    assert moved["type"] == "local"
    assert moved["tools"] == ["*"]
    assert moved["args"][-1] == ALLOW  # the operator's choice, on the host's gateway command
    assert PASSWORD not in config.read_text()
    assert gateway_upstream(box)["env"]["VCENTER_PASSWORD"] == PASSWORD
    assert "jp-ubuntu" in await list_through(box, moved)


def copilot_with_user(
    box: Sandbox, actions_log: Path, home: Path, user: str
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """A Copilot file holding the stand-in; ``install mcp-host copilot --upstream-user USER``."""
    config = home / ".copilot" / "mcp-config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({"mcpServers": {"vsphere": vm_entry(box, actions_log)}}))
    stage = home.parent / "stage"
    stage.mkdir(mode=0o755, exist_ok=True)
    done = cli("copilot", "--server", "vsphere", "--gateway-config", box.config_path,
               "--upstream-user", user, home=home, stage=stage)  # fmt: skip
    return config, done


def test_upstream_user_is_written_and_the_install_stays_quiet(
    box: Sandbox, actions_log: Path, home: Path
) -> None:
    """--upstream-user nobody: upstreams.vsphere.user; root can switch to it, so no warning.

    The install tried the server as nobody: it started and answered initialize.
    """
    _config, done = copilot_with_user(box, actions_log, home, "nobody")
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    nobody = pwd.getpwnam("nobody").pw_uid
    assert f"checked:     started as nobody (uid {nobody}) and answered initialize" in done.stdout
    assert gateway_upstream(box)["user"] == "nobody"
    load_settings(box.env())  # a valid gateway config, user included


def test_upstream_user_that_does_not_exist_writes_nothing(
    box: Sandbox, actions_log: Path, home: Path
) -> None:
    """An unknown --upstream-user is refused before anything is written."""
    before = Path(box.config_path).read_text()
    config, done = copilot_with_user(box, actions_log, home, "zr-no-such-user")
    assert done.returncode == 1
    assert "no user named 'zr-no-such-user'" in done.stderr
    assert Path(box.config_path).read_text() == before
    assert json.loads(config.read_text())["mcpServers"]["vsphere"] == vm_entry(box, actions_log)


def test_help_lists_every_target_with_its_default_path(home: Path) -> None:
    """--help is generated from HOSTS: every target, its user file under HOME, its project file."""
    done = cli("--help", home=home)
    assert done.returncode == 0, done.stderr
    for name, host in HOSTS.items():
        assert f"  {name} " in done.stdout
        if host.project_file:
            assert f"DIR/{host.project_file}" in done.stdout
    assert f"{home}/.gemini/settings.json" in done.stdout
    assert f"{home}/.copilot/mcp-config.json" in done.stdout
    assert f"{home}/.codex/config.toml" in done.stdout


def test_json_names_both_files_their_backups_and_the_token(
    box: Sandbox, actions_log: Path, home: Path
) -> None:
    """--json: the gateway config and the host file written, each with its backup, and the
    client's token (shown once, as in text); the second run finds nothing to do."""
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"mcpServers": {"vsphere": vm_entry(box, actions_log)}}))
    url = f"http://127.0.0.1:{free_port()}"
    argv = (
        "gemini",
        "--server",
        "vsphere",
        "--user",
        "--config",
        box.config_path,
        "--url",
        url,
        "--json",
    )  # fmt: skip  (--config: --gateway-config's other name)
    done = cli(*argv, home=home)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["target"], report["outcome"]) == ("mcp-host", "installed")
    assert report["written"] == [box.config_path, str(settings)]
    assert len(report["backups"]) == 2
    assert all(Path(b).is_file() for b in report["backups"])
    entry = json.loads(settings.read_text())["mcpServers"]["vsphere"]
    assert entry["headers"] == {"Authorization": f"Bearer {report['token']}"}
    again = json.loads(cli(*argv, home=home).stdout)
    assert (again["outcome"], again["written"]) == ("unchanged", [])
