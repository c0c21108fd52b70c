"""``approvals show`` and ``list`` as text (cli/approvals_text.py): whole, visible, compared."""

from __future__ import annotations

import time

from zerto_rewind.cli.approvals_text import details, listing
from zerto_rewind.core.approval_view import request_lines
from zerto_rewind.core.approvals import ApprovalRequest, new_request

RAW = ("\x1b", "\r", "\u202e", "\u200b", "\x07", "\x9b")


def a_request(tool_input: dict[str, object], **changes: object) -> ApprovalRequest:
    fields: dict[str, object] = {
        "tool": "delete_datastore_file",
        "tool_input": tool_input,
        "vms": [],
        "row": "no_vm",
        "why": "no VM in the arguments",
        "principal": "agent-a",
        "wait_s": 60.0,
    }
    fields.update(changes)
    return new_request(**fields)  # type: ignore[arg-type]


def test_show_prints_every_argument_and_no_raw_control_character() -> None:
    request = a_request(
        {"path\x1b[2K\r": "report-\u202egol.hs", "nested": {"list": [1, "a\u200bb"]}},
        tool="t\x1b]0;x\x07",
        vms=["w\u0435b-01\x9b"],
        why="why\r",
        principal="agent\u202e",
    )
    text = details(request, request_lines(request), None, full=False)
    assert not any(ch in text for ch in RAW)
    assert '["path\\x1b[2K\\r"] = "report-<U+202E>gol.hs"' in text
    assert 'nested.list[1] = "a<U+200B>b"' in text
    assert "WARNING" in text
    assert "<U+0435>" in text
    assert "Runs once, with no rewind point" in text
    assert "caller waits until" in text
    assert request.args_digest[:12] in text


def test_show_cuts_a_long_value_with_a_count_and_full_shows_it_whole() -> None:
    value = "/datastore/" + "a" * 2000 + "/END"
    request = a_request({"path": value})
    cut = details(request, request_lines(request), None, full=False)
    assert "characters not shown" in cut
    assert "/END" in cut
    assert value not in cut
    assert f"approvals show {request.id} --full" in cut
    whole = details(request, request_lines(request), None, full=True)
    assert value in whole
    assert "characters not shown" not in whole


def test_a_decided_request_says_by_whom_and_when_never_expires() -> None:
    request = a_request({"path": "x"})
    request.state, request.decided_by, request.decided_at = "denied", "web:olivia", time.time()
    text = details(request, request_lines(request), None, full=False)
    assert "denied    by web:olivia, " in text
    assert "expire" not in text
    assert "open until" not in text
    assert "if approved" not in text


def test_list_shows_what_differs_between_calls_of_one_tool() -> None:
    scratch = a_request({"datastore": "ds1", "path": "scratch/tmp.txt"})
    disk = a_request({"datastore": "ds1", "path": "vm-db/vm-db.vmdk"})
    alone = a_request({"x": 1}, tool="other")
    out = "\n".join(listing([(r, request_lines(r)) for r in (scratch, disk, alone)]))
    assert scratch.args_digest[:12] in out
    assert disk.args_digest[:12] in out
    assert out.count("differs from the most similar other delete_datastore_file request in:") == 2
    assert 'path = "scratch/tmp.txt"' in out
    assert 'path = "vm-db/vm-db.vmdk"' in out
    assert "datastore =" not in out  # the same in both: not a difference
    assert "other request" not in out.split(alone.id)[1]
