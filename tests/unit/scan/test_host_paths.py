"""The scan finds tools that read or write files on the VM server's host (scan/hostpaths.py),
and the catalog, --merge and catalog.from_annotations keep them away from read-only."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.config import CatalogSettings, ToolSpec
from zerto_rewind.core.catalog import MUTATING, classify
from zerto_rewind.scan.heuristics import (
    catalog_from_tools,
    classify_tool,
    extend_catalog,
    merge_into_config,
)
from zerto_rewind.scan.hostpaths import find_host_paths
from zerto_rewind.scan.review import render_review

S: dict[str, Any] = {"type": "string"}


def tool(
    name: str, props: dict[str, Any], description: str = "", **annotations: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": props},
    }
    if annotations:
        spec["annotations"] = annotations
    return spec


@pytest.mark.parametrize("key", ["save_to", "local_path", "output_path", "localFile", "save_as"])
def test_a_name_that_says_local_is_a_host_path_by_itself(key: str) -> None:
    """save_to, local_path, output_path … need no description."""
    found = find_host_paths(tool("get_thing", {"id": S, key: S}))
    assert found.paths == [key]
    assert found.evidence == [f"host path: {key}"]


def test_a_title_that_says_local_counts_like_a_name() -> None:
    """FastMCP titles: a property titled 'Local Path' is a host path."""
    found = find_host_paths(tool("fetch", {"p": {"type": "string", "title": "Local Path"}}))
    assert found.evidence == ["host path: p (title)"]


@pytest.mark.parametrize(
    "text", ["Path of a local file to read", "Where to save to", "Directory on disk"]
)
def test_a_generic_path_name_needs_its_own_text_to_say_local(text: str) -> None:
    """path/file/dest alone are not host paths; with 'local file', 'save to', 'on disk' they are."""
    plain = find_host_paths(tool("read_it", {"file": S}))
    assert plain.paths == []
    described = find_host_paths(tool("read_it", {"file": {"type": "string", "description": text}}))
    assert described.paths == ["file"]
    assert described.evidence[0].startswith("host path: file (described as ")


def test_an_args_block_in_the_tool_description_describes_the_property() -> None:
    """FastMCP servers put each argument's text in the tool's docstring."""
    description = "Fetch a log.\n\n    Args:\n        dest: Local path to write the log to.\n"
    assert find_host_paths(tool("fetch_log", {"dest": S}, description)).paths == ["dest"]


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "string", "format": "path"},
        {"anyOf": [{"type": "string", "format": "file-path"}, {"type": "null"}]},
        {"type": "string", "format": "uri", "examples": ["file:///tmp/x.iso"]},
    ],
)
def test_schema_hints_make_a_host_path(prop: dict[str, Any]) -> None:
    """format: path / file-path, and a uri whose examples use the file: scheme."""
    found = find_host_paths(tool("attach", {"media": prop}))
    assert found.paths == ["media"]


def test_a_uri_without_the_file_scheme_is_not_a_host_path() -> None:
    """An https URL is fetched by the server, it names no file on its host."""
    prop = {"type": "string", "format": "uri", "examples": ["https://example.com/x.iso"]}
    assert find_host_paths(tool("fetch", {"source": prop})).paths == []


def test_the_tool_description_makes_its_generic_paths_host_paths() -> None:
    """'Export the report to a local file': its path argument is on the host."""
    found = find_host_paths(tool("export_report", {"path": S}, "Write it to a local file."))
    assert found.paths == ["path"]
    assert found.evidence == ["host path: path (the tool says 'local file')"]


def test_a_tool_that_says_local_with_no_path_argument_is_flagged_without_one() -> None:
    """It touches the host where no argument says: it needs a person on every call."""
    row = classify_tool(
        "v", tool("dump_logs", {}, "Dumps the logs to a local file.", readOnlyHint=True)
    )
    assert (row.kind, row.host_paths) == (MUTATING, [])
    assert "host files: the tool says 'local file'" in row.evidence
    assert catalog_from_tools("v", [tool("dump_logs", {}, "to a local file")]).catalog["tools"] == {
        "mcp__v__dump_logs": {"decision": "prompt"}
    }


@pytest.mark.parametrize(
    ("props", "description"),
    [
        ({"path": {"type": "string", "description": "[datastore1] folder/x.vmdk"}}, "local file"),
        ({"save_to": {"type": "string", "description": "Datastore path to save the export"}}, ""),
        ({"guest_path": S, "datastore_path": S, "remote_path": S}, "Copy a file, save to the VM"),
        ({"file": {"type": "string", "description": "Absolute file path inside the guest."}}, ""),
    ],
)
def test_datastore_guest_and_remote_paths_are_not_host_paths(
    props: dict[str, Any], description: str
) -> None:
    """The VM side's files ([datastore1] folder/x.vmdk, guest paths) are not the host's."""
    assert find_host_paths(tool("copy_file", props, description)).paths == []


def test_a_read_only_tool_with_a_host_path_needs_a_person_and_runs_without_one() -> None:
    """download_from_datastore: readOnlyHint, but save_to writes the host."""
    props = {"datastore": S, "path": S, "save_to": {"anyOf": [S, {"type": "null"}]}}
    download = tool("download_from_datastore", props, "streams to disk", readOnlyHint=True)
    result = catalog_from_tools("v", [download])
    assert result.catalog == {
        "read_only_tools": [],
        "tools": {
            "mcp__v__download_from_datastore": {"host_paths": ["save_to"], "decision": "allow"}
        },
    }
    row = result.rows[0]
    assert (row.kind, row.host_paths) == (MUTATING, ["save_to"])
    assert row.evidence == ["readOnlyHint", "host path: save_to"]
    assert row.as_dict()["host_paths"] == ["save_to"]


def test_a_mutating_tool_keeps_its_vm_arg_and_gains_host_paths() -> None:
    """A VM tool that also reads a local file: vm_arg and host_paths, no decision."""
    upload = tool("upload_iso_to_vm", {"vm_name": S, "local_path": S}, destructiveHint=True)
    spec = catalog_from_tools("v", [upload]).catalog["tools"]["mcp__v__upload_iso_to_vm"]
    assert spec == {"vm_arg": "vm_name", "host_paths": ["local_path"]}


def test_the_review_table_says_why() -> None:
    """The class reads 'host files' and the evidence names the argument."""
    import io

    rows = catalog_from_tools("v", [tool("get_file", {"save_to": S}, readOnlyHint=True)]).rows
    out = io.StringIO()
    render_review(rows, out, server="v")
    text = out.getvalue()
    assert "host files" in text
    assert "host path: save_to" in text
    assert "1 touch files on the VM server's host" in text


def test_merge_adds_host_paths_to_tools_the_config_calls_read_only() -> None:
    """An older scan's read-only entry becomes a tools entry; a pattern gets an exact one."""
    config = {
        "read_only_tools": ["mcp__v__download", "mcp__v__get_*"],
        "tools": {"mcp__v__upload": {"decision": "deny"}, "mcp__v__copy_*": {"vm_arg": "vm"}},
    }
    proposal = {
        "read_only_tools": [],
        "tools": {
            "mcp__v__download": {"host_paths": ["save_to"], "decision": "allow"},
            "mcp__v__get_file": {"host_paths": ["out"], "decision": "allow"},
            "mcp__v__upload": {"host_paths": ["local_path"]},
            "mcp__v__copy_in": {"vm_arg": "vm", "host_paths": ["local_path"]},
        },
    }
    merged, added, hardened = merge_into_config(config, proposal)
    assert added == []
    assert hardened == ["mcp__v__download", "mcp__v__get_file", "mcp__v__upload", "mcp__v__copy_in"]
    assert merged["read_only_tools"] == ["mcp__v__get_*"]
    tools = merged["tools"]
    assert tools["mcp__v__download"] == {"decision": "allow", "host_paths": ["save_to"]}
    assert tools["mcp__v__get_file"] == {"decision": "allow", "host_paths": ["out"]}
    assert tools["mcp__v__upload"] == {"decision": "deny", "host_paths": ["local_path"]}
    assert tools["mcp__v__copy_in"] == {"vm_arg": "vm", "host_paths": ["local_path"]}
    again, _added, hardened_again = merge_into_config(merged, proposal)
    assert hardened_again == []
    assert again == merged


def test_from_annotations_honours_host_paths_even_over_explicit_entries() -> None:
    """The live schema's host paths are added; explicit read-only still holds without one."""
    catalog = CatalogSettings(
        ("mcp__v__download",),
        {"mcp__v__upload": ToolSpec("mcp__v__upload", (), None, decision="deny")},
        None,
        "prompt",
        "default",
    )
    proposal = {
        "read_only_tools": [],
        "tools": {
            "mcp__v__download": {"host_paths": ["save_to"], "decision": "allow"},
            "mcp__v__upload": {"host_paths": ["local_path"]},
            "mcp__v__fetch": {"host_paths": ["dest"], "decision": "allow"},
        },
    }
    extended = extend_catalog(catalog, proposal)
    plain = classify("mcp__v__download", {"path": "x"}, extended)
    assert (plain.kind, plain.host_paths) == (MUTATING, {})
    assert plain.spec is not None
    assert plain.spec.decision == "allow"
    saving = classify("mcp__v__download", {"save_to": "/etc/x"}, extended)
    assert saving.host_paths == {"save_to": "/etc/x"}
    upload = classify("mcp__v__upload", {"local_path": "/root/.ssh/id_rsa"}, extended)
    assert upload.spec is not None
    assert upload.spec.decision == "deny"
    assert upload.host_paths == {"local_path": "/root/.ssh/id_rsa"}
    fetch = classify("mcp__v__fetch", {"dest": ""}, extended)
    assert fetch.host_paths == {"dest": ""}
