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
