"""Host MCP configs: each host's format, moving a VM server behind the gateway, bypasses."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind.errors import ConfigError, UsageError
from zerto_rewind.gateway.hosts import (
    HOSTS,
    HostFile,
    HttpGateway,
    StdioGateway,
    bypass_findings,
    candidate_files,
    gateway_endpoint,
    is_gateway_entry,
    locate_server,
    looks_like_vm_server,
    move_to_gateway,
    read_gateway_config,
    read_host_config,
    render_host_config,
    vm_server_entries,
    write_gateway_config,
    write_host_config,
)
from zerto_rewind.gateway.http import token_digest

PASSWORD = "Sup3r-Secret!vc"  # a credential that must leave the host file
TOKEN = "tok-0123456789abcdef-tok"
PY = "/opt/venv/bin/python"
CFG = "/etc/zerto-rewind/gateway.json"

VSPHERE_ENV = {
    "VCENTER_HOST": "vc.lab.local",
    "VCENTER_USER": "administrator@vsphere.local",
    "VCENTER_PASSWORD": PASSWORD,
    "VCENTER_INSECURE": "true",
}

GATEWAY: dict[str, Any] = {
    "zvm": {"url": "https://zvm.lab.local", "client_id": "zerto-rewind"},
    "guard": {"timeout_s": 120},
    "upstreams": {"proxmox": {"command": ["proxmox-mcp"], "env": {"PROXMOX_HOST": "pve1"}}},
}

CLAUDE_PROJECT: dict[str, Any] = {
    "mcpServers": {
        "vsphere": {
            "type": "stdio",
            "command": "uvx",
            "args": ["mcvsphere"],
            "env": VSPHERE_ENV,
        },
        "github": {
            "type": "http",
            "url": "https://api.githubcopilot.com/mcp/",
            "headers": {"Authorization": "Bearer ghp_unrelated"},
        },
    }
}

CLAUDE_USER: dict[str, Any] = {
    "numStartups": 41,
    "hasCompletedOnboarding": True,
    "mcpServers": {"memory": {"type": "stdio", "command": "npx", "args": ["-y", "mem"]}},
    "projects": {
        "/home/alice/infra": {
            "allowedTools": [],
            "mcpServers": {
                "vsphere": {
                    "type": "http",
                    "url": "https://vsphere-mcp.lab.local/mcp",
                    "headers": {"Authorization": f"Bearer {PASSWORD}"},
                }
            },
        }
    },
}

DESKTOP: dict[str, Any] = {
    "globalShortcut": "Ctrl+Space",
    "mcpServers": {
        "vsphere": {"command": "npx", "args": ["-y", "@lab/vsphere-mcp"], "env": VSPHERE_ENV},
        "filesystem": {"command": "npx", "args": ["-y", "@mcp/server-filesystem", "/tmp"]},
    },
}

CURSOR: dict[str, Any] = {
    "mcpServers": {
        "vsphere": {
            "url": "https://vsphere-mcp.lab.local/mcp",
            "headers": {"X-Vcenter-Password": PASSWORD},
        },
        "context7": {"command": "npx", "args": ["-y", "@upstash/context7-mcp"]},
    }
}

VSCODE_TEXT = """{
  // VM tools for the agent
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub token", "password": true}
  ],
  "servers": {
    "vsphere": {
      "type": "stdio",
      "command": "mcvsphere",
      "args": [],
      "env": {"VSPHERE_SERVER": "vc.lab.local", "VSPHERE_PASSWORD": "@PASSWORD@"}
    },
    /* an unrelated server */
    "github": {
      "type": "http",
      "url": "https://api.githubcopilot.com/mcp/",
      "headers": {"Authorization": "Bearer ${input:gh-token}"},
    },
  }
}
""".replace("@PASSWORD@", PASSWORD)

CODEX_TEXT = """model = "gpt-5-codex"
approval_policy = "on-request"

# VM servers
[mcp_servers.vsphere]
command = "uvx"
args = ["mcvsphere"]
startup_timeout_sec = 20

[mcp_servers.vsphere.env]
VCENTER_HOST = "vc.lab.local"
VCENTER_PASSWORD = "@PASSWORD@"

# documentation
[mcp_servers.docs]
url = "https://docs.example.com/mcp"
bearer_token_env_var = "DOCS_TOKEN"

[profiles.fast]
model = "gpt-5-mini"
""".replace("@PASSWORD@", PASSWORD)


def write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def stdio() -> StdioGateway:
    return StdioGateway(PY, CFG)


def http(host: str = "cursor") -> HttpGateway:
    return HttpGateway("http://127.0.0.1:8750/mcp/vsphere", f"alice-{host}", TOKEN)


GATEWAY_ARGS = ["-m", "zerto_rewind", "gateway", "--stdio", "--upstream", "vsphere"]


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


def test_claude_desktop_macos_path(tmp_path: Path) -> None:
    from zerto_rewind.gateway.hosts import user_files

    paths = user_files(HOSTS["claude-desktop"], {"HOME": str(tmp_path)}, platform="darwin")
    assert paths[0] == str(
        tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"
    )


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
    data = json.loads(render_host_config(moved))
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


# ------------------------------------------------------------------ refusals


def claude_config(tmp_path: Path, servers: dict[str, Any]) -> Any:
    path = write(tmp_path / ".mcp.json", {"mcpServers": servers})
    return read_host_config(HostFile(HOSTS["claude-code"], str(path)))


def test_refuses_a_server_that_does_not_exist(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    with pytest.raises(
        UsageError, match=r"no MCP server named 'vcenter' \(servers: github, vsphere"
    ):
        move_to_gateway(config, "vcenter", GATEWAY, via=stdio())
    with pytest.raises(UsageError, match="no MCP server named 'vcenter' in"):
        locate_server([config.file], "vcenter")


def test_refuses_an_entry_that_is_already_the_gateway(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    with pytest.raises(UsageError, match="already reaches the zerto-rewind gateway"):
        move_to_gateway(moved, "vsphere", gateway, via=stdio())


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (
            {"command": "mcvsphere", "env": {"VCENTER_PASSWORD": "${VC_PASS}"}},
            "env.VCENTER_PASSWORD",
        ),
        ({"command": "node", "args": ["${workspaceFolder}/vs.js"]}, r"args\[0\]"),
        ({"command": "mcvsphere", "envFile": "/home/a/.vc.env"}, "envFile"),
        ({"command": "mcvsphere", "cwd": "/srv"}, "working directory"),
        ({"type": "sse", "url": "https://vc/sse"}, "type 'sse'"),
        ({"args": ["x"]}, "neither command nor url"),
    ],
)
def test_refuses_what_the_gateway_cannot_carry(
    tmp_path: Path, entry: dict[str, Any], reason: str
) -> None:
    config = claude_config(tmp_path, {"vsphere": entry})
    with pytest.raises(UsageError, match=reason) as caught:
        move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert PASSWORD not in str(caught.value)


def test_refuses_name_and_client_clashes(tmp_path: Path) -> None:
    config = claude_config(tmp_path, {"proxmox": {"command": "other-proxmox-mcp"}})
    with pytest.raises(UsageError, match="already has a different upstream 'proxmox'"):
        move_to_gateway(config, "proxmox", GATEWAY, via=stdio())
    dotted = claude_config(tmp_path, {"vc.prod": {"command": "mcvsphere"}})
    with pytest.raises(UsageError, match="cannot be a gateway upstream"):
        move_to_gateway(dotted, "vc.prod", GATEWAY, via=stdio())
    taken = {**GATEWAY, "gateway": {"clients": {"alice-cursor": "0" * 64}}}
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    with pytest.raises(UsageError, match="already has a token for client 'alice-cursor'"):
        move_to_gateway(config, "vsphere", taken, via=http())


def test_the_same_move_twice_into_the_gateway_is_idempotent(tmp_path: Path) -> None:
    config = claude_config(tmp_path, CLAUDE_PROJECT["mcpServers"])
    _, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    _, again = move_to_gateway(config, "vsphere", gateway, via=stdio())
    assert again == gateway


def test_gateway_endpoint() -> None:
    assert gateway_endpoint("http://127.0.0.1:8750", "vsphere") == (
        "http://127.0.0.1:8750/mcp/vsphere"
    )
    assert gateway_endpoint("https://gw.lab:443/mcp/", "vs") == "https://gw.lab:443/mcp/vs"
    assert gateway_endpoint("https://gw.lab/mcp/vs", "vs") == "https://gw.lab/mcp/vs"
    with pytest.raises(UsageError, match="clear text"):
        gateway_endpoint("http://gw.lab.local:8750", "vsphere")
    with pytest.raises(UsageError, match="http"):
        gateway_endpoint("ftp://127.0.0.1", "vsphere")


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


# ------------------------------------------------------------------ bypass findings


def test_looks_like_vm_server_names_keys_never_values() -> None:
    reasons = looks_like_vm_server(CLAUDE_PROJECT["mcpServers"]["vsphere"])
    assert reasons == [
        "env VCENTER_HOST, VCENTER_INSECURE, VCENTER_PASSWORD, VCENTER_USER",
        "command names mcvsphere, vsphere",
    ]
    assert looks_like_vm_server({"command": "npx", "args": ["-y", "@mcp/server-git"]}) == []
    assert looks_like_vm_server({"url": "https://pve.lab/mcp", "env": {"PROXMOX_TOKEN": "x"}})


def test_bypass_findings_reads_every_known_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = tmp_path / "proj"
    write(home / ".claude.json", CLAUDE_USER)
    write(home / ".config/Claude/claude_desktop_config.json", DESKTOP)
    write(home / ".codex/config.toml", CODEX_TEXT)
    write(project / ".cursor/mcp.json", CURSOR)
    write(project / ".vscode/mcp.json", VSCODE_TEXT)
    (project / ".mcp.json").mkdir(parents=True)  # exists, cannot be read as a file
    gw_config = claude_config(tmp_path, {"vsphere": {"command": "x"}})
    moved, _ = move_to_gateway(gw_config, "vsphere", GATEWAY, via=stdio())
    write(home / ".cursor/mcp.json", {"mcpServers": {"vsphere": moved.servers["vsphere"]}})
    findings = bypass_findings(
        {"HOME": str(home)}, project_dirs=[str(project)], upstream_names=["proxmox"]
    )
    by = {(f.host, f.where, f.server): f for f in findings}
    bypasses = {(f.host, f.server) for f in findings if f.kind == "bypass"}
    assert bypasses == {
        ("claude-code", "vsphere"),  # local scope in ~/.claude.json (url names vsphere)
        ("claude-desktop", "vsphere"),
        ("codex", "vsphere"),
        ("cursor", "vsphere"),
        ("vscode", "vsphere"),
    }
    local = by[("claude-code", f'{home}/.claude.json["projects"]["/home/alice/infra"]', "vsphere")]
    assert local.kind == "bypass"
    assert by[("cursor", str(home / ".cursor/mcp.json"), "vsphere")].kind == "gateway"
    assert by[("claude-code", str(home / ".claude.json"), "memory")].kind == "other"
    unreadable = [f for f in findings if f.kind == "unreadable"]
    assert [f.path for f in unreadable] == [str(project / ".mcp.json")]
    absent = {f.path for f in findings if f.kind == "absent"}
    assert str(home / "Library/Application Support/Code/User/mcp.json") in absent
    for f in findings:
        assert PASSWORD not in f.detail


def test_an_upstream_name_alone_makes_a_bypass(tmp_path: Path) -> None:
    """An entry named like a gateway upstream is a bypass even if it looks harmless."""
    path = write(tmp_path / ".cursor/mcp.json", {"mcpServers": {"proxmox": {"command": "pm"}}})
    files = [HostFile(HOSTS["cursor"], str(path))]
    (plain,) = bypass_findings({}, files=files)
    assert plain.kind == "other"
    (named,) = bypass_findings({}, files=files, upstream_names=["proxmox"])
    assert named.kind == "bypass"
    assert "upstream of this name" in named.detail


def test_doctor_bypass_checks(tmp_path: Path) -> None:
    """One check per file read; a bypass fails with the install command; unreadable warns."""
    from zerto_rewind.cli.doctor_gateway import doctor_bypass_checks

    home = tmp_path / "home"
    write(home / ".claude.json", CLAUDE_USER)
    write(home / ".cursor/mcp.json", {"mcpServers": {"git": {"command": "mcp-git"}}})
    write(home / ".codex/config.toml", "not = [valid toml")
    checks = doctor_bypass_checks({"HOME": str(home)})
    by_status = {c.status: c for c in checks}
    assert {c.status for c in checks} == {"pass", "fail", "warn"}
    claude = next(c for c in checks if c.detail.startswith(f"read {home}/.claude.json"))
    assert claude.status == "fail"
    assert "memory: not a VM server" in claude.detail
    assert '["projects"]["/home/alice/infra"] vsphere: reaches a VM server directly' in (
        claude.detail
    )
    assert claude.fix == (
        "zerto-rewind install mcp-host claude-code --server vsphere "
        "--project /home/alice/infra --gateway-config CONFIG"
    )
    cursor = next(c for c in checks if c.detail.startswith(f"read {home}/.cursor/mcp.json"))
    assert cursor.status == "pass"
    assert "could not read it (not valid TOML" in by_status["warn"].detail
    assert not any(c.detail.startswith(f"read {home}/.codex") for c in checks)
    absent = [c for c in checks if c.detail.startswith("not present: ")]
    assert len(absent) == 1
    assert absent[0].status == "pass"
    for check in checks:
        assert PASSWORD not in check.detail + check.fix
