"""The text formats: a Codex config.toml edited in place, a VS Code JSONC file read."""

from __future__ import annotations

import tomllib
from pathlib import Path

from unit.hostconfig.host_samples import CODEX_TEXT, GATEWAY, PASSWORD, VSCODE_TEXT, stdio, write
from zerto_rewind.hostconfig.files import read_host_config, render_host_config
from zerto_rewind.hostconfig.move import move_to_gateway
from zerto_rewind.hostconfig.specs import HOSTS, HostFile

# Comments, odd spacing and quoting a line-based rewrite would lose.
CODEX_STYLED = (
    "# Codex settings, kept by hand\n"
    'model   =   "gpt-5-codex"   # the default model\n'
    "approval_policy = 'on-request'\n"
    "\n"
    + CODEX_TEXT.split("\n", 2)[2].replace(
        "startup_timeout_sec = 20", "startup_timeout_sec = 20  # the lab is slow"
    )
)


def test_codex_comments_and_formatting_survive_an_edit(tmp_path: Path) -> None:
    """Every line outside the moved server is kept byte for byte, comments included."""
    path = write(tmp_path / "config.toml", CODEX_STYLED)
    config = read_host_config(HostFile(HOSTS["codex"], str(path)))
    moved, _ = move_to_gateway(config, "vsphere", GATEWAY, via=stdio())
    text = render_host_config(moved)
    assert PASSWORD not in text
    kept = [
        "# Codex settings, kept by hand\n",
        'model   =   "gpt-5-codex"   # the default model\n',
        "approval_policy = 'on-request'\n",
        "# VM servers\n",
        "startup_timeout_sec = 20  # the lab is slow\n",  # an unchanged key keeps its comment
        "# documentation\n",
        '[mcp_servers.docs]\nurl = "https://docs.example.com/mcp"\n',
        '[profiles.fast]\nmodel = "gpt-5-mini"\n',
    ]
    for line in kept:
        assert line in text
    assert text.startswith("# Codex settings, kept by hand\n")
    assert text.index("# documentation") < text.index("[mcp_servers.docs]")
    assert tomllib.loads(text) == moved.data


def test_vscode_jsonc_comments_are_read(tmp_path: Path) -> None:
    """Line and block comments and trailing commas in a VS Code mcp.json are read."""
    path = write(tmp_path / ".vscode/mcp.json", VSCODE_TEXT)
    config = read_host_config(HostFile(HOSTS["vscode"], str(path)))
    assert config.had_comments
    assert sorted(config.servers) == ["github", "vsphere"]
    assert config.servers["vsphere"]["env"]["VSPHERE_PASSWORD"] == PASSWORD
    assert config.data["inputs"][0]["id"] == "gh-token"
    # a comment marker inside a string is text, not a comment
    text = '{"servers": {"a": {"url": "https://x.example/mcp//v1", /* c */ "args": ["/*"],},},}'
    write(path, text)
    odd = read_host_config(HostFile(HOSTS["vscode"], str(path)))
    assert odd.servers["a"] == {"url": "https://x.example/mcp//v1", "args": ["/*"]}


def test_json_edit_keeps_every_other_byte_and_adds_to_an_empty_file_object() -> None:
    """Only the changed entry is rewritten; a missing servers object is added at the end."""
    from zerto_rewind.hostconfig.formats import edit_json_servers, parse_jsonc

    text = (
        '{\n  "a": 1, // one\n  "mcpServers": {\n    "x": {"command": "old"},\n'
        '    "y": 2,\n  }\n}\n'
    )
    edited = edit_json_servers(text, (), "mcpServers", {"x": {"command": "new"}, "y": 2})
    assert edited is not None
    assert edited.startswith('{\n  "a": 1, // one\n  "mcpServers": {\n    "x": {\n')
    assert '    "y": 2,\n  }\n}\n' in edited
    assert parse_jsonc(edited) == {"a": 1, "mcpServers": {"x": {"command": "new"}, "y": 2}}
    added = edit_json_servers('{"a": 1 /* c */}', (), "mcpServers", {"x": {}})
    assert added is not None
    assert "/* c */" in added
    assert parse_jsonc(added) == {"a": 1, "mcpServers": {"x": {}}}
    # a removal, or a text the scanner cannot follow, is left to a whole rewrite
    assert edit_json_servers(text, (), "mcpServers", {"x": {}}) is None
    assert edit_json_servers("{a: 1}", (), "mcpServers", {}) is None
