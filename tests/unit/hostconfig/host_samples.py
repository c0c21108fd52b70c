"""Sample host configs for the hostconfig tests: one per host format, credentials included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zerto_rewind.hostconfig.files import read_host_config
from zerto_rewind.hostconfig.move import HttpGateway, StdioGateway
from zerto_rewind.hostconfig.specs import HOSTS, HostFile

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


def claude_config(tmp_path: Path, servers: dict[str, Any]) -> Any:
    path = write(tmp_path / ".mcp.json", {"mcpServers": servers})
    return read_host_config(HostFile(HOSTS["claude-code"], str(path)))


GEMINI_TEXT = """{
  // Gemini CLI's own settings
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "mcpServers": {
    "vsphere": {
      "command": "uvx",
      "args": ["mcvsphere"],
      "env": {"VCENTER_HOST": "vc.lab.local", "VCENTER_PASSWORD": "@PASSWORD@"},
      "trust": false
    },
    "docs": {"httpUrl": "https://docs.example.com/mcp"} // an unrelated server
  }
}
""".replace("@PASSWORD@", PASSWORD)

COPILOT: dict[str, Any] = {
    "mcpServers": {
        "vsphere": {
            "type": "local",
            "command": "uvx",
            "args": ["mcvsphere"],
            "env": VSPHERE_ENV,
            "tools": ["list_vms", "power_off_vm"],
        },
    }
}
