"""The thin hooks record each change's result with the guard service (``POST /v1/result``).

The real guard service (``gateway --socket``) and each host's thin hook as a subprocess:
the call is decided through ``/v1/decide``, then the host's after event posts its
result, read back with ``zerto-rewind session show --json``. Forged results (another
principal's call, a call nobody decided, a read-only or denied call, a repeat) are
refused and nothing is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from support.service import guard_service
from support.users import as_user, reachable_dir, unix_user
from zerto_rewind.hooks.thin import LAUNCH_CODE
from zerto_rewind.service_client import ServiceError, request_json
from zerto_rewind.testing import Sandbox

OWN_UID = str(os.geteuid())
POWER_OFF = "mcp__vsphere__power_off_vm"
VM = {"name": "jp-ubuntu"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sandbox, str]]:
    """The sandbox and its guard service, on a socket every user may connect to."""
    root = tmp_path_factory.mktemp("results")
    with (
        Sandbox(str(root / "box"), guard={"timeout_s": 10}) as box,
        reachable_dir("zr-results-") as run,
        guard_service(box, run, "--socket-mode", "0666") as url,
    ):
        yield box, url


def hook(url: str, host: str, payload: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """The thin hook as ``host`` runs it (``--host``; none for Claude Code)."""
    argv = [sys.executable, "-c", LAUNCH_CODE, "hook", "--service", url,
            "--service-user", OWN_UID, "--budget", "20"]  # fmt: skip
    if host != "claude-code":
        argv += ["--host", host, "--servers", "vsphere"]
    return subprocess.run(argv, input=json.dumps(payload), capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=60, check=False)  # fmt: skip


def session_show(box: Sandbox, session: str) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "session", "show", session, "--json"],
        capture_output=True, text=True, env=box.env(), timeout=120, check=True,
    )  # fmt: skip
    entries: list[dict[str, Any]] = json.loads(proc.stdout)["entries"]
    return entries


# host -> (its before payload, its after payload, the result that after payload says)
def host_payloads(host: str, session: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    if host == "claude-code":
        ids = {"session_id": session, "tool_use_id": "toolu_r1", "tool_name": POWER_OFF,
               "tool_input": VM}  # fmt: skip
        return ({**ids, "hook_event_name": "PreToolUse"},
                {**ids, "hook_event_name": "PostToolUseFailure", "error": "boom"},
                "failed")  # fmt: skip
    if host == "codex":
        ids = {"session_id": session, "turn_id": "t1", "tool_use_id": "call_r1",
               "tool_name": POWER_OFF, "tool_input": VM}  # fmt: skip
        return ({**ids, "hook_event_name": "PreToolUse"},
                {**ids, "hook_event_name": "PostToolUse",
                 "tool_response": {"content": [{"type": "text", "text": "off"}]}},
                "succeeded")  # fmt: skip
    if host == "gemini":  # no tool_use_id: the service and the hook derive the same one
        ids = {
            "session_id": session,
            "tool_name": "mcp_vsphere_power_off_vm",
            "tool_input": VM,
            "mcp_context": {"server_name": "vsphere", "tool_name": "power_off_vm"},
        }
        return ({**ids, "hook_event_name": "BeforeTool"},
                {**ids, "hook_event_name": "AfterTool",
                 "tool_response": {"error": "the VM server failed"}},
                "failed")  # fmt: skip
    ids = {"sessionId": session, "toolCallId": "cp_r1", "toolName": "vsphere-power_off_vm",
           "toolArgs": json.dumps(VM), "cwd": "/"}  # fmt: skip
    return (ids, {**ids, "toolResult": {"resultType": "success", "textResultForLlm": "off"}},
            "succeeded")  # fmt: skip


@pytest.mark.parametrize("host", ["claude-code", "codex", "gemini", "copilot"])
def test_a_change_let_through_then_its_after_event_shows_its_result(
    served: tuple[Sandbox, str], host: str
) -> None:
    """Decided through /v1/decide, then the host's after event: session show has the result,
    and the result line names the caller, the host, the VM and the checkpoint."""
    box, url = served
    session = f"thin-results-{host}"
    before, after, expected = host_payloads(host, session)
    pre = hook(url, host, before)
    assert pre.returncode == 0, pre.stderr
    assert "deny" not in pre.stdout, pre.stdout
    post = hook(url, host, after)
    assert (post.returncode, post.stdout) == (0, ""), post.stderr
    assert post.stderr == ""
    entries = session_show(box, session)
    assert [(e["tool"], e["result"]) for e in entries] == [(POWER_OFF, expected)]
    line = next(r for r in box.result_records() if r["session_id"] == session)
    assert (line["client"], line["host"], line["vms"]) == (f"unix:{_me()}", host, ["jp-ubuntu"])
    assert line["checkpoint_ids"]
    again = hook(url, host, after)  # the same after event again: refused, nothing written
    assert again.returncode == 0
    assert "already recorded" in again.stderr
    assert len([r for r in box.result_records() if r["session_id"] == session]) == 1


def test_a_shell_call_after_event_posts_nothing(served: tuple[Sandbox, str]) -> None:
    """A host's own shell tool was never asked of the service: nothing to record."""
    box, url = served
    before = len(box.result_records())
    payload = {"session_id": "thin-shell", "hook_event_name": "PostToolUse", "tool_name": "Bash",
               "tool_use_id": "call_sh", "tool_input": {"command": "ls"}}  # fmt: skip
    run = hook(url, "codex", payload)
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert len(box.result_records()) == before


def post_result(url: str, body: dict[str, Any]) -> dict[str, Any]:
    opts = {"service": url, "service_user": OWN_UID}
    return request_json(opts, "POST", "/v1/result", json.dumps(body).encode(), timeout_s=15)


def decide(url: str, session: str, tool: str, tool_input: dict[str, Any], use_id: str) -> str:
    body = {"session_id": session, "tool_use_id": use_id, "tool_name": tool,
            "tool_input": tool_input}  # fmt: skip
    opts = {"service": url, "service_user": OWN_UID}
    answer = request_json(opts, "POST", "/v1/decide", json.dumps(body).encode(), timeout_s=15)
    return str(answer["outcome"])


def test_forged_results_are_refused_and_not_written(served: tuple[Sandbox, str]) -> None:
    """A call nobody decided (404), a read-only call (404: it has no decision line), a
    denied call (409): each refused, saying why; the log holds no result for any."""
    box, url = served
    session = "thin-forged"
    assert decide(url, session, "mcp__vsphere__list_vms", {}, "ro-1") == "none"
    assert decide(url, session, POWER_OFF, {"name": "sql-paused-1"}, "deny-1") == "deny"
    forged = [
        ("invented", POWER_OFF, VM, "HTTP 404"),
        ("ro-1", "mcp__vsphere__list_vms", {}, "HTTP 404"),
        ("deny-1", POWER_OFF, {"name": "sql-paused-1"}, "HTTP 409"),
    ]
    for use_id, tool, tool_input, status in forged:
        body = {"session_id": session, "tool_use_id": use_id, "tool_name": tool,
                "tool_input": tool_input, "result": "succeeded", "host": "codex"}  # fmt: skip
        with pytest.raises(ServiceError, match=status):
            post_result(url, body)
    body = {"session_id": session, "tool_use_id": "x", "tool_name": POWER_OFF,
            "tool_input": VM, "result": "done", "host": "codex"}  # fmt: skip
    with pytest.raises(ServiceError, match="HTTP 400"):
        post_result(url, body)
    assert [r for r in box.result_records() if r["session_id"] == session] == []


def test_another_principal_cannot_record_a_result_for_the_call(
    served: tuple[Sandbox, str],
) -> None:
    """The kernel names the caller on the socket: another unix user posting the result of
    this user's call is refused (403), and nothing is written; the owner's post then is."""
    box, url = served
    session = "thin-other-principal"
    assert decide(url, session, POWER_OFF, VM, "mine-1") == "context"
    body = {"session_id": session, "tool_use_id": "mine-1", "tool_name": POWER_OFF,
            "tool_input": VM, "result": "succeeded", "host": "codex"}  # fmt: skip
    raw = json.dumps(body).encode()
    code = (
        "import json, sys\n"
        "from zerto_rewind.service_client import ServiceError, request_json\n"
        f"opts = {{'service': {url!r}, 'service_user': {OWN_UID!r}}}\n"
        "try:\n"
        f"    request_json(opts, 'POST', '/v1/result', {raw!r}, timeout_s=15)\n"
        "except ServiceError as exc:\n"
        "    print(exc)\n"
    )
    with unix_user("zr-res-") as other:
        run = as_user(other.pw_name, [sys.executable, "-c", code])
    assert "HTTP 403" in run.stdout, (run.stdout, run.stderr)
    assert "another principal" in run.stdout
    assert [r for r in box.result_records() if r["session_id"] == session] == []
    assert post_result(url, body) == {"recorded": True}
    assert [r["result"] for r in box.result_records() if r["session_id"] == session] == [
        "succeeded"
    ]


def _me() -> str:
    import pwd

    return pwd.getpwuid(os.geteuid()).pw_name
