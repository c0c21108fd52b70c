"""Gemini CLI and Copilot CLI: their formats read, moved and written as the hosts write them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unit.hostconfig.host_samples import (
    CFG,
    COPILOT,
    GATEWAY,
    GATEWAY_ARGS,
    GEMINI_TEXT,
    PASSWORD,
    PY,
    TOKEN,
    http,
    stdio,
    write,
)
from zerto_rewind.errors import UsageError
from zerto_rewind.hostconfig.bypass import bypass_findings
from zerto_rewind.hostconfig.entries import (
    credential_fields,
    gateway_upstream_of,
    is_gateway_entry,
    looks_like_vm_server,
)
from zerto_rewind.hostconfig.files import read_host_config, render_host_text
from zerto_rewind.hostconfig.formats import parse_jsonc
from zerto_rewind.hostconfig.move import move_to_gateway
from zerto_rewind.hostconfig.specs import HOSTS, HostFile, candidate_files


def gemini(tmp_path: Path, text: str = GEMINI_TEXT) -> HostFile:
    write(tmp_path / ".gemini/settings.json", text)
    (file,) = candidate_files(HOSTS["gemini"], {"HOME": str(tmp_path)}, user=True)
    return file


def test_gemini_stdio_keeps_comments_and_other_keys(tmp_path: Path) -> None:
    """The entry moves; the comments, security.auth and the other server stay byte for byte."""
    config = read_host_config(gemini(tmp_path))
    assert config.had_comments
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"]["env"]["VCENTER_PASSWORD"] == PASSWORD
    text, kept = render_host_text(moved)
    assert kept
    assert PASSWORD not in text
    for line in (
        "  // Gemini CLI's own settings\n",
        '  "security": {"auth": {"selectedType": "gemini-api-key"}},\n',
        '    "docs": {"httpUrl": "https://docs.example.com/mcp"} // an unrelated server\n',
    ):
        assert line in text
    data = parse_jsonc(text)
    assert data == moved.data
    assert data["mcpServers"]["vsphere"] == {
        "command": PY,
        "args": [*GATEWAY_ARGS, "--config", CFG],
        "trust": False,
    }


def test_gemini_http_uses_httpurl_and_reads_it_back(tmp_path: Path) -> None:
    """An HTTP gateway entry is httpUrl + headers; the scan knows it is the gateway."""
    config = read_host_config(gemini(tmp_path))
    moved, _ = move_to_gateway(config, "vsphere", GATEWAY, via=http("gemini"))
    entry = moved.servers["vsphere"]
    assert entry == {
        "httpUrl": "http://127.0.0.1:8750/mcp/vsphere",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "trust": False,
    }
    assert gateway_upstream_of(entry, "vsphere") == "vsphere"


def test_gemini_httpurl_upstream_moves_and_sse_url_is_refused(tmp_path: Path) -> None:
    """httpUrl (streamable HTTP) moves; Gemini's url is SSE, which the gateway cannot reach."""
    servers = {
        "vsphere": {"httpUrl": "https://vc-mcp.lab/mcp", "headers": {"X-Vc-Pass": PASSWORD}},
        "sse": {"url": "https://vc-mcp.lab/sse"},
        "typed": {"type": "http", "url": "https://vc-mcp.lab/mcp"},
    }
    file = gemini(tmp_path, json.dumps({"mcpServers": servers}))
    config = read_host_config(file)
    _, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"] == {
        "url": "https://vc-mcp.lab/mcp",
        "headers": {"X-Vc-Pass": PASSWORD},
    }
    with pytest.raises(UsageError, match="reaches over SSE"):
        move_to_gateway(config, "sse", GATEWAY, via=stdio())
    _, typed = move_to_gateway(config, "typed", GATEWAY, via=stdio())  # url, said to be HTTP
    assert typed["upstreams"]["typed"] == {"url": "https://vc-mcp.lab/mcp"}


def test_gemini_bare_dollar_env_is_a_placeholder(tmp_path: Path) -> None:
    """Gemini expands $VAR in env: moving it would hand the gateway the literal text."""
    entry = {"command": "mcvsphere", "env": {"VCENTER_PASSWORD": "$VC_PASS"}}
    config = read_host_config(gemini(tmp_path, json.dumps({"mcpServers": {"vsphere": entry}})))
    with pytest.raises(UsageError, match=r"env\.VCENTER_PASSWORD use \$… placeholders"):
        move_to_gateway(config, "vsphere", GATEWAY, via=stdio())


def test_copilot_local_is_stdio_both_ways(tmp_path: Path) -> None:
    """type local reads as stdio; the gateway entry is type local, the user's tools list kept."""
    write(tmp_path / ".copilot/mcp-config.json", COPILOT)
    (file,) = candidate_files(HOSTS["copilot"], {"HOME": str(tmp_path)})  # user-only host
    config = read_host_config(file)
    moved, gateway = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    assert gateway["upstreams"]["vsphere"]["command"] == ["uvx", "mcvsphere"]
    assert moved.servers["vsphere"] == {
        "type": "local",
        "command": PY,
        "args": [*GATEWAY_ARGS, "--config", CFG],
        "tools": ["list_vms", "power_off_vm"],
    }
    moved_http, _ = move_to_gateway(config, "vsphere", GATEWAY, via=http("copilot"))
    assert moved_http.servers["vsphere"]["type"] == "http"
    assert moved_http.servers["vsphere"]["url"] == "http://127.0.0.1:8750/mcp/vsphere"


def test_copilot_entry_gets_every_tool_when_it_listed_none(tmp_path: Path) -> None:
    """Copilot offers only the tools an entry lists: the gateway entry gets ["*"]."""
    entry = {k: v for k, v in COPILOT["mcpServers"]["vsphere"].items() if k != "tools"}
    write(tmp_path / ".copilot/mcp-config.json", {"mcpServers": {"vsphere": entry}})
    (file,) = candidate_files(HOSTS["copilot"], {"HOME": str(tmp_path)})
    moved, _ = move_to_gateway(read_host_config(file), "vsphere", GATEWAY, via=stdio())
    assert moved.servers["vsphere"]["tools"] == ["*"]


def test_scan_reads_type_local_and_httpurl(tmp_path: Path) -> None:
    """The bypass scan sees a local VM server and an httpUrl one, with their credential keys."""
    local = COPILOT["mcpServers"]["vsphere"]
    remote = {"httpUrl": "https://vcenter-mcp.lab/mcp", "headers": {"Authorization": "Bearer x"}}
    assert looks_like_vm_server(local, "vsphere")
    assert "url names vcenter" in looks_like_vm_server(remote, "lab")
    path = write(tmp_path / "settings.json", {"mcpServers": {"lab": remote}})
    (finding,) = bypass_findings({}, files=[HostFile(HOSTS["gemini"], str(path))])
    assert (finding.kind, finding.credentials) == ("bypass", ("headers.Authorization",))
    gateway = {"httpUrl": "http://127.0.0.1:1/mcp/lab", "headers": {"Authorization": "Bearer t"}}
    assert is_gateway_entry(gateway, "lab")


def test_credential_fields_name_keys_and_options_never_values() -> None:
    entry = {
        "command": "mcvsphere",
        "args": ["--host", "vc", "--password", PASSWORD, "--token=${VC_TOKEN}"],
        "env": {"VCENTER_PASSWORD": PASSWORD, "VCENTER_HOST": "vc", "GOVC_TOKEN": "${T}"},
        "headers": {"Authorization": "Bearer ${input:tok}", "X-Api-Key": PASSWORD},
    }
    found = credential_fields(entry)
    assert found == ["env.VCENTER_PASSWORD", "headers.X-Api-Key", "args[2] (--password)"]
    assert PASSWORD not in " ".join(found)
    assert credential_fields({"command": "mcvsphere"}) == []
