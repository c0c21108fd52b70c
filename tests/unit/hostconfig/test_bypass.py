"""The doctor's bypass scan: host entries that still reach a VM server directly."""

from __future__ import annotations

from pathlib import Path

from unit.hostconfig.host_samples import (
    CLAUDE_USER,
    CODEX_TEXT,
    CURSOR,
    DESKTOP,
    GATEWAY,
    PASSWORD,
    VSCODE_TEXT,
    claude_config,
    stdio,
    write,
)
from zerto_rewind.hostconfig.bypass import bypass_findings
from zerto_rewind.hostconfig.move import move_to_gateway
from zerto_rewind.hostconfig.specs import HOSTS, HostFile


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
    path = write(tmp_path / ".cursor/mcp.json", {"mcpServers": {"pm": {"command": "pm"}}})
    files = [HostFile(HOSTS["cursor"], str(path))]
    (plain,) = bypass_findings({}, files=files)
    assert plain.kind == "other"
    (named,) = bypass_findings({}, files=files, upstream_names=["pm"])
    assert named.kind == "bypass"
    assert "upstream of this name" in named.detail


def test_doctor_bypass_checks(tmp_path: Path) -> None:
    """One check per file read; a bypass fails with the install command; unreadable warns."""
    from zerto_rewind.cli.doctor.gateway import doctor_bypass_checks

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
