"""Where each host keeps its config files."""

from __future__ import annotations

from pathlib import Path

from zerto_rewind.hostconfig.specs import HOSTS


def test_claude_desktop_macos_path(tmp_path: Path) -> None:
    from zerto_rewind.hostconfig.specs import user_files

    paths = user_files(HOSTS["claude-desktop"], {"HOME": str(tmp_path)}, platform="darwin")
    assert paths[0] == str(
        tmp_path / "Library/Application Support/Claude/claude_desktop_config.json"
    )


def test_every_host_names_its_user_files_from_known_bases(tmp_path: Path) -> None:
    """A host is data: its user paths start with a known base, and each resolves under home."""
    from zerto_rewind.hostconfig.specs import BASES, user_files

    env = {"HOME": str(tmp_path)}
    for host in HOSTS.values():
        assert host.user_paths, host.name
        assert {p.split("/", 1)[0] for p in host.user_paths} <= set(BASES)
        for platform in ("linux", "darwin"):
            paths = user_files(host, env, platform=platform)
            assert len(paths) == len(host.user_paths)
            assert all(p.startswith(str(tmp_path)) for p in paths)
    linux = user_files(HOSTS["vscode"], env, platform="linux")
    assert linux == [
        str(tmp_path / ".config/Code/User/mcp.json"),
        str(tmp_path / "Library/Application Support/Code/User/mcp.json"),
    ]
    assert user_files(HOSTS["vscode"], env, platform="darwin") == linux[::-1]
    assert user_files(HOSTS["codex"], {**env, "CODEX_HOME": "/c"}) == ["/c/config.toml"]
    assert user_files(HOSTS["claude-code"], {**env, "CLAUDE_CONFIG_DIR": "/k"}) == [
        "/k/.claude.json"
    ]
