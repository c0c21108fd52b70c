"""One reader for a host's config file: the object, or one message naming file, fault and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from zerto_rewind.errors import ConfigError
from zerto_rewind.hostconfig.objectfile import read_object_file


def test_an_absent_file_is_an_empty_object_that_does_not_exist(tmp_path: Path) -> None:
    read = read_object_file(str(tmp_path / "absent.json"))
    assert (read.data, read.text, read.exists) == ({}, None, False)


def test_an_empty_file_is_an_empty_object_that_exists(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("  \n")
    read = read_object_file(str(path))
    assert (read.data, read.text, read.exists) == ({}, "  \n", True)


def test_each_syntax_reads_its_own_files(tmp_path: Path) -> None:
    plain = tmp_path / "a.json"
    plain.write_text('{"mcpServers": {}}')
    assert read_object_file(str(plain)).data == {"mcpServers": {}}
    commented = tmp_path / "b.json"
    commented.write_text('{\n  // VS Code\n  "servers": {"a": 1,},\n}\n')
    read = read_object_file(str(commented), "jsonc")
    assert (read.data, read.had_comments) == ({"servers": {"a": 1}}, True)
    toml = tmp_path / "c.toml"
    toml.write_text('[mcp_servers.vsphere]\ncommand = "mcvsphere"\n')
    assert read_object_file(str(toml), "toml").data == {
        "mcp_servers": {"vsphere": {"command": "mcvsphere"}}
    }


@pytest.mark.parametrize(
    ("name", "content", "syntax", "fault"),
    [
        ("strict.json", '{"a": 1, // no\n}', "json", "not valid JSON ("),
        ("broken.json", '{"a": ', "jsonc", "not valid JSON ("),
        ("broken.toml", "[a\n", "toml", "not valid TOML ("),
        ("list.json", "[1, 2]", "json", "must hold an object at the top level"),
        ("latin1.json", b'{"a": "\xe9"}', "json", "cannot read it (not UTF-8)"),
    ],
)
def test_a_file_that_cannot_be_used_names_itself_the_fault_and_the_fix(
    tmp_path: Path, name: str, content: str | bytes, syntax: str, fault: str
) -> None:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ConfigError) as caught:
        read_object_file(str(path), syntax)  # type: ignore[arg-type]
    error = caught.value
    assert error.path == str(path)
    assert fault in error.problem
    assert "fix it by hand or move it aside" in error.advice
    assert "nothing was written" in error.advice


def test_a_directory_in_the_files_place_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read it \(Is a directory\)"):
        read_object_file(str(tmp_path))


def test_the_message_never_quotes_the_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.json"
    path.write_text('{"env": {"VCENTER_PASSWORD": "hunter2"} oops')
    with pytest.raises(ConfigError) as caught:
        read_object_file(str(path), "jsonc")
    assert "hunter2" not in str(caught.value)
