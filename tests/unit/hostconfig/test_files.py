"""Each host's file format read, moved and rendered; the gateway config; atomic writes."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from unit.hostconfig.host_samples import (
    CFG,
    CLAUDE_PROJECT,
    CLAUDE_USER,
    CODEX_TEXT,
    CURSOR,
    DESKTOP,
    GATEWAY,
    GATEWAY_ARGS,
    PASSWORD,
    PY,
    TOKEN,
    VSCODE_TEXT,
    VSPHERE_ENV,
    http,
    stdio,
    write,
)
from zerto_rewind.errors import ConfigError, UsageError
from zerto_rewind.hostconfig.entries import is_gateway_entry, vm_server_entries
from zerto_rewind.hostconfig.files import (
    locate_server,
    read_gateway_config,
    read_host_config,
    render_host_config,
    write_gateway_config,
    write_host_config,
)
from zerto_rewind.hostconfig.formats import parse_jsonc
from zerto_rewind.hostconfig.move import move_to_gateway
from zerto_rewind.hostconfig.specs import HOSTS, HostFile, candidate_files
from zerto_rewind.netutil import token_digest

# ------------------------------------------------------------------ each host's format


def test_claude_code_project_stdio_round_trip(tmp_path: Path) -> None:
    """.mcp.json: the entry moves with its env; the host gets the stdio gateway; github stays."""
    path = write(tmp_path / ".mcp.json", CLAUDE_PROJECT)
    config = read_host_config(HostFile(HOSTS["claude-code"], str(path)))
    assert set(vm_server_entries(config)) == {"vsphere", "github"}
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"] == {"command": ["uvx", "mcvsphere"], "env": VSPHERE_ENV}
    assert gateway["upstreams"]["proxmox"] == GATEWAY["upstreams"]["proxmox"]
    assert gateway["zvm"] == GATEWAY["zvm"]
    entry = moved.servers["vsphere"]
    assert entry == {
        "type": "stdio",
        "command": PY,
        "args": [*GATEWAY_ARGS, "--config", CFG],
    }
    assert moved.servers["github"] == CLAUDE_PROJECT["mcpServers"]["github"]
    text = render_host_config(moved)
    assert PASSWORD not in text
    assert json.loads(text)["mcpServers"]["vsphere"] == entry
    assert list(json.loads(text)["mcpServers"]) == ["vsphere", "github"]  # order kept
    assert is_gateway_entry(entry, "vsphere")
    # neither input was changed
    assert "vsphere" not in GATEWAY["upstreams"]
    assert config.servers["vsphere"]["env"] == VSPHERE_ENV


def test_claude_code_local_scope_in_claude_json_http(tmp_path: Path) -> None:
    """~/.claude.json keeps per-project servers; an HTTP VM server moves with its headers."""
    path = write(tmp_path / ".claude.json", CLAUDE_USER)
    env = {"HOME": str(tmp_path)}
    files = candidate_files(HOSTS["claude-code"], env, project="/home/alice/infra")
    assert [f.path for f in files] == [
        "/home/alice/infra/.mcp.json",
        str(path),
    ]
    config = locate_server(files, "vsphere")
    assert config.file.scope == ("projects", "/home/alice/infra")
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=http("claude-code"))
    assert gateway["upstreams"]["vsphere"] == {
        "url": "https://vsphere-mcp.lab.local/mcp",
        "headers": {"Authorization": f"Bearer {PASSWORD}"},
    }
    assert gateway["gateway"]["clients"] == {"alice-claude-code": token_digest(TOKEN)}
    text = render_host_config(moved)
    data = json.loads(text)
    entry = data["projects"]["/home/alice/infra"]["mcpServers"]["vsphere"]
    assert entry == {
        "type": "http",
        "url": "http://127.0.0.1:8750/mcp/vsphere",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
    assert PASSWORD not in text
    assert data["numStartups"] == 41
    assert data["mcpServers"] == CLAUDE_USER["mcpServers"]
    assert data["projects"]["/home/alice/infra"]["allowedTools"] == []
    assert TOKEN not in json.dumps(gateway)


def test_claude_desktop_stdio_and_no_http(tmp_path: Path) -> None:
    """Claude Desktop's file: Linux path by default; stdio moves; an HTTP entry is refused."""
    env = {"HOME": str(tmp_path)}
    (file,) = candidate_files(HOSTS["claude-desktop"], env, user=True)
    if os.uname().sysname != "Darwin":
        assert file.path == str(tmp_path / ".config/Claude/claude_desktop_config.json")
    write(Path(file.path), DESKTOP)
    config = read_host_config(file)
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"]["command"] == ["npx", "-y", "@lab/vsphere-mcp"]
    assert moved.servers["vsphere"] == {"command": PY, "args": [*GATEWAY_ARGS, "--config", CFG]}
    text = render_host_config(moved)
    assert PASSWORD not in text
    assert json.loads(text)["globalShortcut"] == "Ctrl+Space"
    assert json.loads(text)["mcpServers"]["filesystem"] == DESKTOP["mcpServers"]["filesystem"]
    with pytest.raises(UsageError, match="stdio servers only"):
        move_to_gateway(config, "vsphere", GATEWAY, via=http("claude-desktop"))
    with pytest.raises(UsageError, match="no project config"):
        candidate_files(HOSTS["claude-desktop"], env, project=str(tmp_path))


def test_cursor_http_round_trip(tmp_path: Path) -> None:
    """Cursor: an HTTP VM server (credential in a header) moves; the host gets url + token."""
    path = write(tmp_path / "proj/.cursor/mcp.json", CURSOR)
    (file,) = candidate_files(HOSTS["cursor"], {}, project=str(tmp_path / "proj"))
    assert file.path == str(path)
    config = read_host_config(file)
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=http())
    assert gateway["upstreams"]["vsphere"]["headers"] == {"X-Vcenter-Password": PASSWORD}
    assert moved.servers["vsphere"] == {
        "url": "http://127.0.0.1:8750/mcp/vsphere",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
    }
    assert moved.servers["context7"] == CURSOR["mcpServers"]["context7"]
    assert PASSWORD not in render_host_config(moved)
    assert is_gateway_entry(moved.servers["vsphere"], "vsphere")
    assert not is_gateway_entry(moved.servers["vsphere"], "other-name")


def test_vscode_jsonc_round_trip(tmp_path: Path) -> None:
    """.vscode/mcp.json: comments and trailing commas are read; `servers`, typed entries."""
    path = write(tmp_path / ".vscode/mcp.json", VSCODE_TEXT)
    config = read_host_config(HostFile(HOSTS["vscode"], str(path)))
    assert config.had_comments
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"] == {
        "command": ["mcvsphere"],
        "env": {"VSPHERE_SERVER": "vc.lab.local", "VSPHERE_PASSWORD": PASSWORD},
    }
    assert moved.servers["vsphere"]["type"] == "stdio"
    text = render_host_config(moved)
    assert "// VM tools for the agent" in text  # the comments survive the edit
    assert "/* an unrelated server */" in text
    data = parse_jsonc(text)
    assert data == moved.data
    assert data["inputs"][0]["id"] == "gh-token"
    assert data["servers"]["github"]["headers"] == {"Authorization": "Bearer ${input:gh-token}"}
    assert PASSWORD not in render_host_config(moved)
    moved_http, _ = move_to_gateway(config, "vsphere", GATEWAY, via=http("vscode"))
    assert moved_http.servers["vsphere"]["type"] == "http"


def test_codex_toml_stdio_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    """config.toml: the server's tables are rewritten in place; every other line is kept."""
    path = write(tmp_path / ".codex/config.toml", CODEX_TEXT)
    (file,) = candidate_files(HOSTS["codex"], {"HOME": str(tmp_path)}, user=True)
    assert file.path == str(path)
    config = read_host_config(file)
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"] == {
        "command": ["uvx", "mcvsphere"],
        "env": {"VCENTER_HOST": "vc.lab.local", "VCENTER_PASSWORD": PASSWORD},
    }
    text = render_host_config(moved)
    assert PASSWORD not in text
    data = tomllib.loads(text)
    assert data["mcp_servers"]["vsphere"] == {
        "command": PY,
        "args": [*GATEWAY_ARGS, "--config", CFG],
        "startup_timeout_sec": 20,  # a host-side knob stays
        "tool_timeout_sec": 150,  # guard budget 120 s + margin: Codex waits for the tag
        "required": True,  # fail closed: no Codex session without its VM tools
    }
    assert data["mcp_servers"]["docs"] == {
        "url": "https://docs.example.com/mcp",
        "bearer_token_env_var": "DOCS_TOKEN",
    }
    assert data["profiles"] == {"fast": {"model": "gpt-5-mini"}}
    for line in ("# VM servers\n", "# documentation\n", 'model = "gpt-5-codex"\n'):
        assert line in text
    assert text.index("[mcp_servers.vsphere]") < text.index("[mcp_servers.docs]")


def test_codex_toml_http_and_quoting(tmp_path: Path) -> None:
    """An HTTP entry gets http_headers; names and values that need quoting are quoted."""
    text = CODEX_TEXT.replace("[mcp_servers.vsphere", '[mcp_servers."vsphere"')
    text = text.replace(f'"{PASSWORD}"', '"p@ss\\"w\\\\ord"')
    path = write(tmp_path / "config.toml", text)
    config = read_host_config(HostFile(HOSTS["codex"], str(path)))
    assert config.servers["vsphere"]["env"]["VCENTER_PASSWORD"] == 'p@ss"w\\ord'
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=http("codex"))
    assert gateway["upstreams"]["vsphere"]["env"]["VCENTER_PASSWORD"] == 'p@ss"w\\ord'
    out = tomllib.loads(render_host_config(moved))
    assert out["mcp_servers"]["vsphere"]["url"] == "http://127.0.0.1:8750/mcp/vsphere"
    assert out["mcp_servers"]["vsphere"]["http_headers"] == {"Authorization": f"Bearer {TOKEN}"}
    assert "p@ss" not in render_host_config(moved)


def test_codex_inline_table_is_refused(tmp_path: Path) -> None:
    """A server written as an inline table is not edited (nothing half-rewritten)."""
    text = '[mcp_servers]\nvsphere = { command = "uvx", args = ["mcvsphere"] }\n'
    path = write(tmp_path / "config.toml", text)
    config = read_host_config(HostFile(HOSTS["codex"], str(path)))
    moved, _ = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    with pytest.raises(ConfigError, match="inline table"):
        render_host_config(moved)


# ------------------------------------------------------------------ the gateway config file


def test_gateway_config_must_be_private(tmp_path: Path) -> None:
    path = write(tmp_path / "gateway.json", GATEWAY)
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="readable or writable by others") as caught:
        read_gateway_config(str(path))
    assert "chmod 600" in str(caught.value)
    os.chmod(path, 0o660)
    with pytest.raises(ConfigError, match="by others"):
        read_gateway_config(str(path))
    with pytest.raises(ConfigError, match="not found"):
        read_gateway_config(str(tmp_path / "missing.json"))


def test_writes_are_atomic_private_and_backed_up(tmp_path: Path) -> None:
    """Gateway config 0600 with a 0600 backup; the host backup goes to the private dir."""
    gw_path = write(tmp_path / "etc/gateway.json", GATEWAY)
    os.chmod(gw_path, 0o600)
    host_path = write(tmp_path / "proj/.mcp.json", CLAUDE_PROJECT)
    os.chmod(host_path, 0o644)
    gateway = read_gateway_config(str(gw_path))
    config = read_host_config(HostFile(HOSTS["claude-code"], str(host_path)))
    moved, new_gateway = move_to_gateway(config, "vsphere", gateway.data, via=stdio())
    gw_backup = write_gateway_config(gateway, new_gateway)
    host_backup = write_host_config(
        moved, render_host_config(moved), backup_dir=str(tmp_path / "etc/host-backups")
    )
    assert os.stat(gw_path).st_mode & 0o777 == 0o600
    assert os.stat(gw_backup).st_mode & 0o777 == 0o600
    assert json.loads(Path(gw_backup).read_text()) == GATEWAY
    assert json.loads(gw_path.read_text())["upstreams"]["vsphere"]["env"] == VSPHERE_ENV
    assert host_backup is not None
    assert host_backup.startswith(str(tmp_path / "etc/host-backups"))
    assert os.stat(host_backup).st_mode & 0o777 == 0o600
    assert os.stat(tmp_path / "etc/host-backups").st_mode & 0o777 == 0o700
    assert PASSWORD in Path(host_backup).read_text()
    assert os.stat(host_path).st_mode & 0o777 == 0o644  # the host file's mode is kept
    assert PASSWORD not in host_path.read_text()
    assert sorted(os.listdir(host_path.parent)) == [".mcp.json"]  # no backup left beside it


def test_root_rewriting_a_users_host_file_leaves_it_theirs(tmp_path: Path) -> None:
    """An admin moving an agent user's server (as root) must not lock that user out of
    their own host file: it keeps its owner, and with a token only they may read it."""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    gw_path = write(tmp_path / "etc/gateway.json", GATEWAY)
    os.chmod(gw_path, 0o600)
    host_path = write(tmp_path / "home/.mcp.json", CLAUDE_PROJECT)
    os.chmod(host_path, 0o644)
    os.chown(host_path, 4242, 4243)
    gateway = read_gateway_config(str(gw_path))
    config = read_host_config(HostFile(HOSTS["claude-code"], str(host_path)))
    moved, _ = move_to_gateway(config, "vsphere", gateway.data, via=stdio())
    write_host_config(
        moved, render_host_config(moved), backup_dir=str(tmp_path / "etc/host-backups"),
        private=True,
    )  # fmt: skip
    info = os.stat(host_path)
    assert (info.st_uid, info.st_gid) == (4242, 4243)
    assert info.st_mode & 0o777 == 0o600
    assert PASSWORD not in host_path.read_text()
