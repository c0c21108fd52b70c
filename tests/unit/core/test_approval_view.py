"""What the approver sees of a request (core/approval_view.py, approval_secrets.py)."""

from __future__ import annotations

import unicodedata

import pytest

from zerto_rewind.core.approval_secrets import mask_secrets, schema_secret_paths
from zerto_rewind.core.approval_view import (
    ArgLine,
    approver_json,
    argument_lines,
    confusable_note,
    differences,
    if_approved,
    lines_of,
    request_lines,
    shorten,
    timing,
    timing_text,
    visible,
)
from zerto_rewind.core.approvals import APPROVED, DENIED, USED, new_request

BIDI = [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]


def lines(arguments: object, **kwargs: object) -> dict[str, ArgLine]:
    return {line.path: line for line in argument_lines(arguments, **kwargs)}  # type: ignore[arg-type]


# --------------------------------------------------------------------------- visible


@pytest.mark.parametrize("code", [*range(0x20), 0x7F, *range(0x80, 0xA0)])
def test_every_c0_and_c1_control_is_an_escape(code: int) -> None:
    shown = visible(f"a{chr(code)}b")
    assert chr(code) not in shown
    assert shown in {"a\\nb", "a\\rb", "a\\tb", f"a\\x{code:02x}b"}


@pytest.mark.parametrize("code", BIDI)
def test_every_bidi_control_is_an_escape(code: int) -> None:
    assert visible(f"report-{chr(code)}gol.hs") == f"report-<U+{code:04X}>gol.hs"


def test_every_format_character_is_an_escape() -> None:
    """Category Cf (zero-width space, joiner, BOM, soft hyphen, tags…), every one of them."""
    format_chars = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
    assert len(format_chars) > 100
    shown = visible("".join(format_chars))
    assert not any(unicodedata.category(ch) == "Cf" for ch in shown)
    assert "<U+200B>" in shown
    assert "<U+FEFF>" in shown
    assert "\\xad" in shown


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\u2028", "<U+2028>"),  # line separator
        ("\u2029", "<U+2029>"),  # paragraph separator
        ("\ue000", "<U+E000>"),  # private use
        ("\U000e0001", "<U+E0001>"),  # language tag (Cf)
        ("\u00a0", "\\xa0"),  # a space that is not a space
        ("\u3000", "<U+3000>"),
        ("\ud800", "<U+D800>"),  # a lone surrogate
        ("\U0010fffe", "<U+10FFFE>"),  # unassigned
    ],
)
def test_separators_private_use_odd_spaces_and_unassigned_are_escapes(raw: str, shown: str) -> None:
    assert visible(f"x{raw}y") == f"x{shown}y"


def test_escape_sequences_are_text_and_a_typed_escape_cannot_pass_for_ours() -> None:
    assert visible("\x1b[2J\x1b]0;pwned\x07\rok") == "\\x1b[2J\\x1b]0;pwned\\x07\\rok"
    assert visible("\\x1b") == "\\\\x1b"  # typed by the agent: shown doubled, not as ESC's escape
    assert visible("plain ünïcödé, 日本, emoji 🙂 and space") == (
        "plain ünïcödé, 日本, emoji 🙂 and space"
    )


# --------------------------------------------------------------------------- lines


def test_every_key_and_value_nested_ones_included() -> None:
    shown = lines(
        {
            "datastore": "[ds-1] vm-disk.vmdk",
            "spec": {"disks": [{"size_gb": 40, "thin": True}, None], "tags": []},
            "weird name\x1b[31m": "v\u202e",
            "empty": {},
        }
    )
    assert shown["datastore"].value == '"[ds-1] vm-disk.vmdk"'
    assert shown["spec.disks[0].size_gb"].value == "40"
    assert shown["spec.disks[0].thin"].value == "true"
    assert shown["spec.disks[1]"].value == "null"
    assert shown["spec.tags"].value == "[]"
    assert shown["empty"].value == "{}"
    assert shown['["weird name\\x1b[31m"]'].value == '"v<U+202E>"'
    assert all("\x1b" not in p and "\u202e" not in ln.value for p, ln in shown.items())


def test_quotes_and_types_stay_distinct() -> None:
    shown = lines({"a": "5", "b": 5, "c": 'say "hi"', "d": "true"})
    assert [shown[k].value for k in "abcd"] == ['"5"', "5", '"say \\"hi\\""', '"true"']


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "admin_password",
        "passwd",
        "db_pass",
        "pwd",
        "token",
        "accessToken",
        "api_key",
        "apiKey",
        "X-Api-Key",
        "private_key",
        "privateKey",
        "secret",
        "client_secret",
        "credential",
        "credentials",
        "ssh_key",
        "Authorization",
        "passphrase",
    ],
)
def test_secret_looking_keys_are_masked_with_length_and_digest(key: str) -> None:
    (line,) = argument_lines({key: "hunter2-hunter2"})
    assert line.secret
    assert "hunter2" not in line.value
    assert line.value.startswith("<secret: 15 characters, sha256 ")
    assert line.length == 15


@pytest.mark.parametrize("key", ["vm", "keyboard_layout", "monkey_count", "path", "save_to"])
def test_other_keys_are_shown(key: str) -> None:
    (line,) = argument_lines({key: "visible-value"})
    assert not line.secret
    assert line.value == '"visible-value"'


def test_two_secrets_differ_by_digest_and_a_secret_subtree_is_masked_whole() -> None:
    one, two = (lines({"token": t})["token"].value for t in ("aaaa", "aaab"))
    assert one != two
    shown = lines({"credentials": {"user": "root", "pw": "x"}})
    assert list(shown) == ["credentials"]
    assert "root" not in shown["credentials"].value


def test_schema_marks_secrets_by_write_only_and_format_password() -> None:
    schema = {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "login": {"type": "string", "format": "password"},
            "blob": {"type": "string", "writeOnly": True},
            "nested": {"type": "object", "properties": {"pin": {"writeOnly": True}}},
            "items": {"type": "array", "items": {"properties": {"otp": {"format": "password"}}}},
            "either": {"anyOf": [{"type": "string", "writeOnly": True}, {"type": "null"}]},
        },
    }
    paths = schema_secret_paths(schema)
    assert set(paths) == {"login", "blob", "nested.pin", "items[].otp", "either"}
    args = {
        "host": "h",
        "login": "l-value",
        "blob": "b-value",
        "nested": {"pin": "1234"},
        "items": [{"otp": "999111"}],
        "either": "e-value",
    }
    shown = lines(args, secret_paths=paths)
    assert shown["host"].value == '"h"'
    for path in ("login", "blob", "nested.pin", "items[0].otp", "either"):
        assert shown[path].secret, path
    assert schema_secret_paths(None) == []


# --------------------------------------------------------------------------- long values, paths


def test_a_long_value_is_cut_only_with_head_tail_and_a_count() -> None:
    value = "A" * 50 + "x" * 1000 + "THE-END"
    (line,) = argument_lines({"content": value})
    assert line.value == f'"{value}"'  # the line keeps it whole
    short = shorten(line.value)
    assert short.startswith('"' + "A" * 50)
    assert short.endswith('THE-END"')
    assert f"{len(line.value) - 200:,} characters not shown" in short
    assert shorten("short") == "short"


def test_a_padded_host_path_is_shown_resolved_beside_what_was_sent() -> None:
    padded = "/var/tmp/allowed/" + "./" * 300 + "../../../etc/cron.d/job"
    shown = lines({"save_to": padded, "other": "/a/./b"}, host_paths=["save_to"])
    assert shown["save_to"].resolved == "/etc/cron.d/job"
    assert shown["save_to"].value == f'"{padded}"'
    assert shown["save_to"].host_path
    assert shown["other"].resolved is None  # not a host path: no resolution claimed
    assert lines({"p": "/var/tmp/a/./../b"}, host_paths=["p"])["p"].resolved == "/var/tmp/b"
    assert lines({"p": "/var/tmp/b"}, host_paths=["p"])["p"].resolved is None
    assert lines({"p": "//x//y"}, host_paths=["p"])["p"].resolved == "/x/y"
    fanned = lines({"files": [{"to": "/t/../u"}]}, host_paths=["files[].to"])
    assert fanned["files[0].to"].resolved == "/u"


def test_if_approved_names_runs_once_the_vms_and_the_resolved_paths() -> None:
    request = new_request(
        tool="download",
        tool_input={"vm": "web-01", "save_to": "/srv/./x/../y"},
        vms=["web-01"],
        row="host_path",
        why="w",
        principal="p",
        host_paths={"save_to": "/srv/./x/../y"},
    )
    text = if_approved(request, request_lines(request))
    assert text.startswith("Runs once, with no rewind point")
    assert "web-01" in text
    assert "/srv/y (sent as" in text
    no_vm = new_request(tool="t", tool_input={}, vms=[], row="no_vm", why="w", principal="p")
    assert "naming no VM" in if_approved(no_vm, [])


# --------------------------------------------------------------------------- names, diffs


def test_a_confusable_vm_name_is_flagged() -> None:
    assert confusable_note("web-01") is None
    note = confusable_note("w\u0435b-01")  # Cyrillic e
    assert note is not None
    assert "<U+0435>" in note
    assert "CYRILLIC" in note
    assert "LATIN" in note


def test_what_differs_between_requests_of_one_tool() -> None:
    a = argument_lines({"datastore": "ds1", "path": "scratch/tmp.txt", "force": True})
    b = argument_lines({"datastore": "ds1", "path": "vm-db/vm-db.vmdk", "force": True})
    c = argument_lines({"datastore": "ds1", "force": True, "extra": 1})
    assert differences({"A": a, "B": b}) == {"A": ["path"], "B": ["path"]}
    three = differences({"A": a, "B": b, "C": c})
    assert three["C"] == ["extra", "path"]  # its own paths first, then the other's
    assert three["A"] == ["path"]  # from B, the request most like it, not from C
    assert differences({"A": a}) == {"A": []}


# --------------------------------------------------------------------------- the request


def test_the_request_keeps_the_whole_arguments_and_sends_them_as_lines() -> None:
    value = "y" * 5000
    request = new_request(
        tool="t",
        tool_input={"content": value, "password": "pw-123"},
        vms=[],
        row="no_vm",
        why="w",
        principal="p",
        secret_paths=["content2"],
    )
    # Kept whole, but a secret only as its mask: the state never holds it.
    assert request.call_arguments["content"] == value
    assert request.call_arguments["password"].startswith("<secret: 6 characters, sha256 ")
    sent = approver_json(request)
    assert sent["call_arguments"] is None  # the raw arguments stay in the service
    assert "pw-123" not in str(sent)
    shown = {line.path: line for line in lines_of(sent)}
    assert shown["content"].value == f'"{value}"'  # whole, one step away
    assert shown["password"].secret
    assert shown["password"].length == 6
    assert shown["password"].value == request.call_arguments["password"]


def test_an_old_request_without_whole_arguments_still_shows_what_it_kept() -> None:
    request = new_request(tool="t", tool_input={}, vms=[], row="no_vm", why="w", principal="p")
    request.call_arguments, request.arguments = None, {"k\x1b": "<text, 3 chars>"}
    assert request_lines(request) == [ArgLine("k\\x1b", "<text, 3 chars>", 15)]


def test_timing_says_until_when_the_caller_waits_and_never_expires_once_decided() -> None:
    now = 1_700_000_000.0
    request = new_request(
        tool="t",
        tool_input={},
        vms=[],
        row="no_vm",
        why="w",
        principal="p",
        now=now,
        expires_s=600,
        wait_s=60,
    )
    labels = [label for label, _, _ in timing(request, now + 10)]
    assert labels == ["asked", "caller waits", "open until"]
    assert timing(request, now + 10)[1][2] == now + 60
    assert timing(request, now + 100)[1][0] == "caller"  # it stopped waiting
    stopped = dict(timing_text(request, now + 100))["caller"]
    assert stopped.startswith("stopped waiting (if approved, its retry runs once) ")
    assert "(approved," not in stopped  # pending: nothing reads as if it were approved
    hook = new_request(tool="t", tool_input={}, vms=[], row="no_vm", why="w", principal="p")
    assert "does not wait" in dict(timing_text(hook, now))["caller"]
    for state in (APPROVED, DENIED, USED):
        request.state, request.decided_by, request.decided_at = state, "web:olivia", now + 30
        request.used_at = now + 40
        text = dict(timing_text(request, now + 50))
        assert "open until" not in text
        assert "expires" not in str(text)
        verb = "denied" if state == DENIED else "approved"
        assert text[verb].startswith("by web:olivia, 2023-11-14 22:13:50 UTC")


def test_a_flood_of_requests_of_one_tool_is_compared_with_neighbours() -> None:
    views = {f"R{i}": argument_lines({"n": i // 2, "same": "x"}) for i in range(400)}
    found = differences(views)
    assert found["R0"] == []  # R1 has the same arguments
    assert found["R399"] == []
    assert all(paths in ([], ["n"]) for paths in found.values())


def test_secrets_are_masked_before_they_are_kept_and_the_mask_is_not_masked_twice() -> None:
    kept = mask_secrets(
        {"api_key": "k-123", "spec": {"otp": "999", "name": "n"}}, secret_paths=["spec.otp"]
    )
    assert kept["spec"]["name"] == "n"
    assert kept["api_key"].startswith("<secret: 5 characters, sha256 ")
    assert mask_secrets(kept, ["spec.otp"]) == kept
    shown = lines(kept, secret_paths=["spec.otp"])
    assert shown["api_key"].value == kept["api_key"]
    assert shown["spec.otp"].length == 3
    # A mask typed by the agent where nothing is secret reads as the string it is.
    fake = lines({"note": kept["api_key"]})["note"]
    assert not fake.secret
    assert fake.value == f'"{kept["api_key"]}"'
