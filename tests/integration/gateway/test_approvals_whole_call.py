"""The approver sees the whole call, safely: through the real gateway, socket, CLI and page.

The real ``zerto-rewind gateway`` process runs the stand-in upstream whose
``download_from_datastore`` writes ``save_to`` on its own host (host_path_server.py);
the agent calls over HTTP with its token; a real approver user (``useradd``) runs
the real ``zerto-rewind approvals`` over the real approvals socket, and the page
is read in Debian's headless Chromium. What is checked, as the issue's attacks:

- two calls that differ only in one value look different, on the CLI and the page;
- a ``save_to`` padded past 500 characters shows the path it really names;
- escape sequences, CR and bidi controls in values and keys reach the approver's
  terminal only as visible text: the raw bytes the CLI writes hold none of them;
- the approved call's result tells the agent it ran with no rewind point, and who
  approved it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    actions,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from support.users import namespace_command, reachable_dir, unix_user
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parent / "host_path_server.py"
TOOL = "mcp__vsphere__download_from_datastore"
WEB, PASSWORD = "olivia", "correct horse battery"
# Bytes that must never reach the approver's terminal: ESC, CR, BEL, C1 controls (UTF-8),
# and every bidi control (U+202A-202E, U+2066-2069, U+200E/F, U+061C) in UTF-8.
FORBIDDEN = [
    b"\x1b",
    b"\r",
    b"\x07",
    *[chr(c).encode() for c in range(0x80, 0xA0)],
    *[chr(c).encode() for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]],
    *[chr(c).encode() for c in (0x200E, 0x200F, 0x061C, 0x200B)],
]


@pytest.fixture
def approver() -> Iterator[str]:
    with unix_user("zr-rnd-") as user:
        yield user.pw_name


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user can reach, for the approvals socket (mode 0666 inside)."""
    with reachable_dir("zr-whole-") as path:
        yield path


@pytest.fixture
def gw(
    box: Sandbox, tmp_path: Path, actions_log: Path, approver: str, open_dir: Path
) -> Iterator[tuple[GatewayProcess, str]]:
    upstream = {
        "command": [sys.executable, str(SERVER)],
        "env": {"E2E_VM_ACTIONS_LOG": str(actions_log), "PYTHONDONTWRITEBYTECODE": "1"},
        "timeout_s": 10,
    }
    gateway_config(
        box,
        upstream=upstream,
        read_only_tools=[],
        tools={TOOL: {"host_paths": ["save_to"], "decision": "allow"}},
        approvals={
            "approvers": {"users": [approver]},
            "web_approvers": {WEB: hash_password(PASSWORD)},
            "wait_s": 0.5,
        },
    )
    sock = str(open_dir / "approvals.sock")
    args = ("--approvals-socket", sock, "--approvals-listen", "127.0.0.1:0")
    with gateway_process(box, tmp_path, extra_args=args) as process:
        yield process, sock


def raw_cli(user: str, sock: str, *args: str) -> bytes:
    """The bytes ``zerto-rewind approvals`` writes to its terminal, run as ``user``."""
    import pwd

    info = pwd.getpwnam(user)
    argv = [sys.executable, "-m", "zerto_rewind", "approvals", "--service", f"unix:{sock}", *args]
    with tempfile.TemporaryDirectory(prefix="zr-stage-") as stage:
        os.chmod(stage, 0o755)
        command = namespace_command(info.pw_uid, info.pw_gid, argv, stage=Path(stage))
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "USER": user, "LANG": "C.UTF-8"}
        done = subprocess.run(command, env=env, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout + done.stderr


def assert_only_visible(raw: bytes) -> None:
    for byte in FORBIDDEN:
        assert byte not in raw, f"{byte!r} reached the terminal"


async def ask(process: GatewayProcess, arguments: dict[str, Any]) -> Any:
    async with client(process.endpoint(), TOKENS["agent-a"]) as c:
        return await c.call_tool("download_from_datastore", arguments)


def pending_ids(user: str, sock: str) -> list[dict[str, Any]]:
    listed = json.loads(raw_cli(user, sock, "list", "--json"))
    assert isinstance(listed, list)
    return listed


async def test_the_approver_tells_calls_apart_and_sees_only_visible_text(
    gw: tuple[GatewayProcess, str], approver: str, tmp_path: Path, actions_log: Path, box: Sandbox
) -> None:
    process, sock = gw
    save_to = str(tmp_path / "downloads" / "copy.bin")
    (tmp_path / "downloads").mkdir()
    padded = str(tmp_path / "downloads") + "/" + "./" * 300 + "../../etc-elsewhere/cron"
    hostile = {
        "datastore": "ds1\x1b[2J\x1b[H",
        "path": "report-\u202egol.hs\rscratch",
        "save_to": save_to,
        "note\x1b]0;owned\x07\u2066": "\x9b31m red",
    }
    calls = [
        {"datastore": "ds1", "path": "scratch/tmp.txt", "save_to": save_to},
        {"datastore": "ds1", "path": "vm-db/vm-db-flat.vmdk", "save_to": save_to},
        {"datastore": "ds1", "path": "iso/readme.txt", "save_to": padded},
        hostile,
    ]
    for arguments in calls:
        refused = await ask(process, arguments)
        assert refused.is_error  # waits for a person; nothing ran
    assert actions(actions_log) == []
    requests = pending_ids(approver, sock)
    assert len(requests) == 4
    scratch, disk, pad, evil = (r["id"] for r in requests)
    digests = {r["digest"] for r in requests}
    assert len(digests) == 4  # each call its own digest

    # (a) the two calls differ on the CLI: the list names the value that differs.
    listing = raw_cli(approver, sock, "list").decode()
    assert 'path = "scratch/tmp.txt"' in listing
    assert 'path = "vm-db/vm-db-flat.vmdk"' in listing
    shown_scratch = raw_cli(approver, sock, "show", scratch).decode()
    shown_disk = raw_cli(approver, sock, "show", disk).decode()
    assert 'argument  path = "scratch/tmp.txt"' in shown_scratch
    assert 'argument  path = "vm-db/vm-db-flat.vmdk"' in shown_disk
    assert "Runs once, with no rewind point" in shown_disk
    assert "caller    stopped waiting" in shown_disk

    # (b) the padded path: its real target, beside what was sent, whole with --full.
    target = str(tmp_path.parent / "etc-elsewhere" / "cron")  # outside tmp_path
    assert f"(resolves to {target})" in listing
    shown_pad = raw_cli(approver, sock, "show", pad).decode()
    assert f"resolves to {target}" in shown_pad
    assert "characters not shown" in shown_pad
    assert f'"{padded}"' in raw_cli(approver, sock, "show", pad, "--full").decode()

    # (c) escapes in values and keys: only visible text, in every view.
    for raw in (
        raw_cli(approver, sock, "list"),
        raw_cli(approver, sock, "show", evil),
        raw_cli(approver, sock, "show", evil, "--full"),
        raw_cli(approver, sock, "recent"),
    ):
        assert_only_visible(raw)
    text = raw_cli(approver, sock, "show", evil).decode()
    assert 'datastore = "ds1\\x1b[2J\\x1b[H"' in text
    assert 'path = "report-<U+202E>gol.hs\\rscratch"' in text
    assert '["note\\x1b]0;owned\\x07<U+2066>"] = "\\x9b31m red"' in text

    # The decision log never carries an argument value.
    log_text = Path(box.log_path).read_text()
    assert "scratch/tmp.txt" not in log_text
    assert "etc-elsewhere" not in log_text

    # The same requests on the page, in headless Chromium.
    await anyio.to_thread.run_sync(page_check, process, (scratch, disk, pad, evil), target)

    # Approved, the retry runs once and its result says there is no rewind point.
    raw_cli(approver, sock, "approve", scratch)
    ran = await ask(process, calls[0])
    assert not ran.is_error, text_of(ran)
    assert "ran with no rewind point" in text_of(ran)
    assert f"unix:{approver} approved this call at " in text_of(ran)
    assert ran.meta["zerto-rewind/approval"]["approval_id"] == scratch
    assert [a["tool"] for a in actions(actions_log)] == ["download_from_datastore"]
    decided = raw_cli(approver, sock, "show", scratch).decode()
    assert f"approved  by unix:{approver}, " in decided
    assert "expire" not in decided
    answers = [(d.get("answer"), d.get("approval_id")) for d in decisions(box)]
    assert ("approved", scratch) in answers


def page_check(process: GatewayProcess, ids: tuple[str, ...], target: str) -> None:
    """The same requests on the page, in headless Chromium."""
    from support.browser import browser_errors, chrome, login, missing_browser, wait_for_request

    if missing_browser() is not None:
        pytest.skip(missing_browser() or "")
    _, disk, pad, evil = ids
    assert process.info is not None
    base = process.info["approvals_url"]
    with chrome() as driver:
        login(driver, base, WEB, PASSWORD)
        disk_card = wait_for_request(driver, disk)
        assert 'path = "' not in disk_card.text  # a table row, not CLI text
        rows = disk_card.find_elements("css selector", "tr.differs")
        assert [r.get_attribute("data-path") for r in rows] == ["path"]
        assert '"vm-db/vm-db-flat.vmdk"' in rows[0].text
        pad_card = wait_for_request(driver, pad)
        assert f"resolves to {target}" in pad_card.text
        whole = pad_card.find_element("css selector", "details.whole")
        whole.find_element("css selector", "summary").click()
        assert "./././" in whole.find_element("css selector", "pre").text
        evil_card = wait_for_request(driver, evil)
        shown = evil_card.text
        assert '"report-<U+202E>gol.hs\\rscratch"' in shown
        assert "note\\x1b]0;owned\\x07<U+2066>" in shown
        source = driver.page_source
        for raw in ("\u202e", "\u2066", "\x1b", "\x9b", "\r"):
            assert raw not in source, repr(raw)
        assert browser_errors(driver) == []


PHRASE, CODE = "correct-staple-recovery-4417", "unlock-90210-code"


async def test_values_the_tools_schema_marks_secret_are_masked_for_the_approver_and_in_state(
    gw: tuple[GatewayProcess, str], approver: str, box: Sandbox, actions_log: Path
) -> None:
    """``set_guest_recovery``'s schema marks ``recovery_phrase`` writeOnly and ``unlock_code``
    ``format: password``; their names look like no secret. The agent calls it at once, with
    no tools/list of its own: the approver sees each by length and digest only, and the
    values are in no file of the state directory and not in the log."""
    process, sock = gw
    async with client(process.endpoint(), TOKENS["agent-a"]) as c:
        asked = await c.call_tool(
            "set_guest_recovery",
            {"vm_name": "scratch-01", "recovery_phrase": PHRASE, "unlock_code": CODE},
        )
    assert asked.is_error
    assert "waiting for an approver" in text_of(asked)
    assert actions(actions_log) == []
    (request,) = pending_ids(approver, sock)
    shown = raw_cli(approver, sock, "show", request["id"], "--full").decode()
    assert "argument  recovery_phrase = <secret: 28 characters, sha256 " in shown
    assert "argument  unlock_code = <secret: 17 characters, sha256 " in shown
    assert 'argument  vm_name = "scratch-01"' in shown
    listed = raw_cli(approver, sock, "list", "--json").decode()
    for text in (shown, listed):
        assert PHRASE not in text
        assert CODE not in text
    kept = [p for p in Path(box.state_dir).rglob("*") if p.is_file()]
    assert kept, "the request is kept in the state directory"
    for path in [*kept, Path(box.log_path)]:
        raw = path.read_bytes()
        assert PHRASE.encode() not in raw, path
        assert CODE.encode() not in raw, path
