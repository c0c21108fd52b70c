"""The thin hook's unix-socket path stays light: no json, re, typing, enum, ssl, http.client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from zerto_rewind.hooks.thin import LAUNCH_CODE

HEAVY = ("json", "re", "typing", "dataclasses", "enum", "signal", "ssl", "http.client", "httpx")
READ_ONLY_CALL = {
    "session_id": "thin-fast-path",
    "hook_event_name": "PreToolUse",
    "tool_name": "mcp__vsphere__get_vm",
    "tool_input": {"name": "jp-ubuntu"},
    "tool_use_id": "toolu_01",
}


def test_a_read_only_answer_over_the_socket_imports_nothing_heavy(tmp_path: Path) -> None:
    """A service answering `none`: silent exit 0, and none of HEAVY was imported."""
    path = tmp_path / "guard.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(30)
    body = b'{"outcome": "none", "row": "read_only", "reason": "", "context": ""}'

    def answer() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            conn.sendall(head + body)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        # the listener is this process
        proc = hook_importtime(["--service", f"unix:{path}", "--budget", "20",
                                "--service-user", str(os.geteuid())], READ_ONLY_CALL)  # fmt: skip
    finally:
        thread.join(timeout=30)
        server.close()
    assert (proc.returncode, proc.stdout) == (0, "")
    imported = imported_modules(proc.stderr)
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))
    assert "struct" not in imported  # the peer check reads struct ucred with int.from_bytes
    assert "pwd" not in imported  # a numeric --service-user (install writes one) needs no lookup


def test_a_host_tools_after_event_posts_nothing_and_imports_nothing_heavy(tmp_path: Path) -> None:
    """Codex's PostToolUse for its own shell tool: no request (the socket does not exist,
    and nothing is said about it), silent exit 0, none of HEAVY imported."""
    after = {**READ_ONLY_CALL, "tool_name": "Bash", "tool_input": {"command": "ls"}}
    after["hook_event_name"] = "PostToolUse"
    service = f"unix:{tmp_path / 'absent.sock'}"
    proc = hook_importtime(["--host", "codex", "--service", service, "--service-user", "0"], after)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert not [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]
    imported = imported_modules(proc.stderr)
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def hook_importtime(
    options: list[str], payload: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """The thin hook with ``options``, fed ``payload``, under ``-X importtime``."""
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", LAUNCH_CODE, "hook", *options],
        input=json.dumps(payload), capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def imported_modules(stderr: str) -> set[str]:
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
