"""Prove the e2e harness against the real Claude Code CLI with a throwaway PreToolUse hook.

The hook (``HOOK_SOURCE``) appends its stdin to a file and then follows a rules file keyed by
tool name: ``deny``/``ask`` with a reason, ``allow``, ``defer``, ``context`` (additionalContext),
``sleep`` seconds first; a tool without a rule gets a silent exit 0 (no decision).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_anthropic import FakeAnthropic, call
from e2e.harness import (
    INSPECTOR_BIN,
    VM_SERVER,
    ClaudeMissing,
    E2ESession,
    claude_path,
    mcp_config,
    mcp_tool,
    read_actions,
    write_plugin,
)
from e2e.throwaway_hook import throwaway_hook
from e2e.vm_mcp_server import ssh_host

POWER_OFF = mcp_tool("power_off_vm")
RECONFIGURE = mcp_tool("reconfigure_vm")
SNAPSHOT = mcp_tool("snapshot_vms")
RUN_COMMAND = mcp_tool("run_command")

MODES = ["bypassPermissions", "default"]


# -- deny / ask ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("decision", ["deny", "ask"])
def test_denied_call_never_reaches_the_server(e2e: E2ESession, mode: str, decision: str) -> None:
    """A hook deny or ask stops the call: the server never sees it, the model gets the reason."""
    reason = f"zerto-rewind test: {decision} power_off_vm on web-01"
    hook = throwaway_hook(e2e, {POWER_OFF: {decision: reason}})
    e2e.script([[call(POWER_OFF, name="web-01")], "understood"])

    run = e2e.run("Power off web-01.", settings=hook.settings, permission_mode=mode)

    assert run.ok, run.describe()
    assert run.result == "understood"
    assert e2e.actions() == [], "a denied call reached the VM server"
    [denial] = run.permission_denials
    [tool_use_id] = e2e.api.tool_use_ids()
    assert denial == {
        "tool_name": POWER_OFF,
        "tool_use_id": tool_use_id,
        "tool_input": {"name": "web-01"},
    }
    seen = e2e.api.tool_result(tool_use_id)
    assert seen.is_error
    assert reason in seen.text
    if decision == "deny":
        assert seen.text == f"PreToolUse:{POWER_OFF} hook error: {reason}"
    assert [c["permission_mode"] for c in hook.calls()] == [mode]


# -- allow + additionalContext -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "decision"),
    [("bypassPermissions", None), ("bypassPermissions", "allow"), ("default", "allow")],
)
def test_allowed_call_reaches_the_server_and_the_model_sees_the_context(
    e2e: E2ESession, mode: str, decision: str | None
) -> None:
    """A hook's additionalContext reaches the model after the tool result of a call that ran."""
    context = "Checkpoint zr-e2e-123 tagged on VPG vpg-web at 2026-01-01T00:00:00Z; rewind with …"
    rule: dict[str, Any] = {"context": context}
    if decision:
        rule[decision] = "checkpoint confirmed"
    hook = throwaway_hook(e2e, {RECONFIGURE: rule})
    e2e.script([[call(RECONFIGURE, vm={"name": "web-01", "cpus": 4})], "reconfigured"])

    run = e2e.run(settings=hook.settings, permission_mode=mode)

    assert run.ok, run.describe()
    assert run.permission_denials == []
    assert [(a["vm"], a["action"]) for a in e2e.actions()] == [("web-01", "reconfigure_vm")]
    [result] = e2e.api.tool_results()
    assert not result.is_error
    assert "web-01 reconfigured: cpus=4" in result.text
    # additionalContext arrives as a mid-conversation system message after the tool result.
    expected = f"PreToolUse:{RECONFIGURE} hook additional context: {context}"
    assert e2e.api.system_texts()[-1] == expected
    assert e2e.api.saw(context)
    last = e2e.api.main_requests()[-1].body["messages"]
    assert [m["role"] for m in last[-3:]] == ["assistant", "user", "system"]


def test_context_without_a_decision_is_not_enough_in_default_mode(e2e: E2ESession) -> None:
    """In ``-p`` default mode an MCP call with no hook decision falls to the permission flow,
    which cannot prompt, so it is denied: a guard must say ``allow`` to let it through."""
    hook = throwaway_hook(e2e, {RECONFIGURE: {"context": "checkpoint zr-1"}})
    e2e.script([[call(RECONFIGURE, vm={"name": "web-01", "cpus": 4})], "ok"])

    run = e2e.run(settings=hook.settings, permission_mode="default")

    assert run.ok, run.describe()
    assert e2e.actions() == []
    assert run.denied_tools == [RECONFIGURE]
    [result] = e2e.api.tool_results()
    assert result.is_error
    assert "haven't granted it yet" in result.text


# -- what the hook receives --------------------------------------------------------------------


def test_hook_stdin_has_the_documented_fields(e2e: E2ESession) -> None:
    """The hook's stdin carries session, tool and tool-use ids, permission mode and the input."""
    hook = throwaway_hook(e2e, {})
    e2e.script([[call(RUN_COMMAND, command="ssh admin@jp-ubuntu.lab.local 'sudo reboot'")], "ok"])

    run = e2e.run(settings=hook.settings)

    assert run.ok, run.describe()
    [event] = hook.calls()
    [tool_use_id] = e2e.api.tool_use_ids()
    assert {
        "session_id",
        "transcript_path",
        "cwd",
        "prompt_id",
        "permission_mode",
        "effort",
        "hook_event_name",
        "tool_name",
        "tool_input",
        "tool_use_id",
    } <= set(event)
    assert event["session_id"] == run.session_id
    assert event["hook_event_name"] == "PreToolUse"
    assert event["tool_name"] == RUN_COMMAND
    assert event["tool_input"] == {"command": "ssh admin@jp-ubuntu.lab.local 'sudo reboot'"}
    assert event["tool_use_id"] == tool_use_id
    assert event["permission_mode"] == "bypassPermissions"
    assert Path(event["cwd"]) == e2e.project_dir
    assert Path(event["transcript_path"]).is_relative_to(e2e.home / ".claude" / "projects")
    assert event["mcp_server"] == {"name": "vsphere", "source": "dynamic"}  # 2.1.328 extra
    assert [(a["vm"], a["action"]) for a in e2e.actions()] == [
        ("jp-ubuntu.lab.local", "run_command")
    ]


# -- parallel tool use -------------------------------------------------------------------------


def test_two_calls_in_one_turn_both_go_through_the_hook(e2e: E2ESession) -> None:
    """Two tool calls in one assistant turn each run the hook."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"deny": "no checkpoint for web-01"}})
    e2e.script(
        [[call(POWER_OFF, name="web-01"), call(SNAPSHOT, vms=["db-01", "jp-ubuntu"])], "done both"]
    )

    run = e2e.run(settings=hook.settings)

    assert run.ok, run.describe()
    power_id, snapshot_id = e2e.api.tool_use_ids()
    assert sorted(c["tool_use_id"] for c in hook.calls()) == sorted([power_id, snapshot_id])
    assert run.denied_tools == [POWER_OFF]
    assert [(a["vm"], a["action"]) for a in e2e.actions()] == [
        ("db-01", "snapshot_vms"),
        ("jp-ubuntu", "snapshot_vms"),
    ]
    assert e2e.api.tool_result(power_id).is_error
    assert not e2e.api.tool_result(snapshot_id).is_error
    # both results come back in one user message, as the API requires
    [message] = [
        m for m in e2e.api.main_requests()[-1].body["messages"]
        if m["role"] == "user" and any(b.get("type") == "tool_result" for b in m["content"])
    ]  # fmt: skip
    assert len([b for b in message["content"] if b.get("type") == "tool_result"]) == 2


# -- hook timeout --------------------------------------------------------------------------------


@pytest.mark.parametrize("on_failure", ["block", None])
def test_a_hook_past_its_timeout(e2e: E2ESession, on_failure: str | None) -> None:
    """A hook past its timeout: blocked with onFailure block, the call runs without it."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"sleep": 4}}, timeout=1, on_failure=on_failure)
    e2e.script([[call(POWER_OFF, name="web-01")], "ok"])

    run = e2e.run(settings=hook.settings)

    assert run.ok, run.describe()
    assert len(hook.calls()) == 1
    assert run.duration < 4, "the CLI waited for the hook beyond its timeout"
    [result] = e2e.api.tool_results()
    if on_failure == "block":
        assert e2e.actions() == []
        assert run.denied_tools == [POWER_OFF]
        assert result.is_error
        assert 'timed out; blocking because onFailure is "block"' in result.text
    else:
        assert [a["action"] for a in e2e.actions()] == ["power_off_vm"]
        assert run.permission_denials == []
        assert not result.is_error


# -- defer and resume --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_defer_stops_the_run_and_resume_asks_the_hook_again(e2e: E2ESession, mode: str) -> None:
    """defer stops a -p run with the deferred call; --resume runs the hook again for it."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"defer": True}})
    e2e.script([[call(POWER_OFF, name="web-01")], "powered off after the checkpoint"])

    first = e2e.run("Power off web-01.", settings=hook.settings, permission_mode=mode)

    assert first.ok, first.describe()
    [tool_use_id] = e2e.api.tool_use_ids()
    assert first.stop_reason == "tool_deferred"
    assert first.get("terminal_reason") == "tool_deferred"
    assert first.get("subtype") == "success"
    assert not first.is_error
    assert first.result == ""
    assert first.deferred_tool_use == {
        "id": tool_use_id,
        "name": POWER_OFF,
        "input": {"name": "web-01"},
    }
    assert first.permission_denials == []
    assert e2e.actions() == []
    assert e2e.api.tool_results() == []

    # The checkpoint has landed: the hook now allows. Resume with the same flags, no prompt.
    hook.set_rules({POWER_OFF: {"allow": "checkpoint landed"}})
    second = e2e.run(None, settings=hook.settings, permission_mode=mode, resume=first.session_id)

    assert second.ok, second.describe()
    assert second.session_id == first.session_id
    assert second.stop_reason == "end_turn"
    assert second.result == "powered off after the checkpoint"
    calls = hook.calls()
    assert [c["tool_use_id"] for c in calls] == [tool_use_id, tool_use_id]
    assert "prompt_id" in calls[0]
    assert "prompt_id" not in calls[1]  # the resumed PreToolUse has no prompt behind it
    assert [a["action"] for a in e2e.actions()] == ["power_off_vm"]
    assert not e2e.api.tool_result(tool_use_id).is_error
    assert "Continue from where you left off." in e2e.api.user_texts()


def test_a_resumed_deferred_call_can_still_be_denied(e2e: E2ESession) -> None:
    """On --resume the hook may deny the deferred call after all."""
    reason = "tag still pending; retry after 12:00:30Z"
    hook = throwaway_hook(e2e, {POWER_OFF: {"defer": True}})
    e2e.script([[call(POWER_OFF, name="web-01")], "will retry later"])
    first = e2e.run(settings=hook.settings)
    assert first.stop_reason == "tool_deferred", first.describe()

    hook.set_rules({POWER_OFF: {"deny": reason}})
    second = e2e.run(None, settings=hook.settings, resume=first.session_id)

    assert second.ok, second.describe()
    assert e2e.actions() == []
    assert second.denied_tools == [POWER_OFF]
    assert second.result == "will retry later"
    [result] = e2e.api.tool_results()
    assert result.is_error
    assert reason in result.text


def test_resume_does_not_restore_the_permission_mode(e2e: E2ESession) -> None:
    """--resume starts in default mode unless --permission-mode is given again."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"defer": True}})
    e2e.script([[call(POWER_OFF, name="web-01")], "ok"])
    first = e2e.run(settings=hook.settings, permission_mode="bypassPermissions")
    assert first.stop_reason == "tool_deferred", first.describe()

    hook.set_rules({})  # no decision: only bypassPermissions would let it run
    second = e2e.run(None, settings=hook.settings, resume=first.session_id, permission_mode=None)

    assert second.ok, second.describe()
    assert [c["permission_mode"] for c in hook.calls()] == ["bypassPermissions", "default"]
    assert second.denied_tools == [POWER_OFF]
    assert e2e.actions() == []


def test_resume_with_a_prompt_yields_two_results(e2e: E2ESession) -> None:
    """``--resume ID`` plus a prompt settles the deferred call first (its own model turn, after
    "Continue from where you left off."), then runs the prompt as a new turn. ``--output-format
    json`` prints only the *last* result, whose permission_denials misses the deferred call's
    denial; stream-json shows both."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"defer": True}})
    e2e.script([[call(POWER_OFF, name="web-01")], "will retry later", "answer to the prompt"])
    first = e2e.run(settings=hook.settings)
    assert first.stop_reason == "tool_deferred", first.describe()

    hook.set_rules({POWER_OFF: {"deny": "still pending"}})
    second = e2e.run(
        "retry", settings=hook.settings, resume=first.session_id, output_format="stream-json"
    )

    assert second.ok, second.describe()
    settled, answered = second.results
    assert (settled["result"], settled["result_index"]) == ("will retry later", 0)
    assert [d["tool_name"] for d in settled["permission_denials"]] == [POWER_OFF]
    assert (answered["result"], answered["result_index"]) == ("answer to the prompt", 1)
    assert answered["permission_denials"] == []
    assert second.data == answered  # what --output-format json would have printed
    assert second.all_permission_denials == settled["permission_denials"]
    assert e2e.api.user_texts()[-2:] == ["Continue from where you left off.", "retry"]
    assert e2e.actions() == []


# -- plugin-delivered hooks ---------------------------------------------------------------------


def test_a_hook_from_a_plugin_dir_gates_the_call(e2e: E2ESession) -> None:
    """A hook in a --plugin-dir plugin gates calls like one in settings."""
    hook = throwaway_hook(e2e, {POWER_OFF: {"deny": "denied by the plugin's hook"}})
    plugin = write_plugin(e2e.project_dir.parent / "plugin", json.loads(hook.settings.read_text()))
    e2e.script([[call(POWER_OFF, name="web-01")], "ok"])

    run = e2e.run(plugin_dirs=[plugin])

    assert run.ok, run.describe()
    assert e2e.actions() == []
    assert run.denied_tools == [POWER_OFF]
    assert "denied by the plugin's hook" in e2e.api.tool_results()[0].text
    [event] = hook.calls()
    assert event["tool_name"] == POWER_OFF


# -- the VM server's simulator hook-up ---------------------------------------------------------


@pytest.fixture
def sim_control_plane() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A stand-in for the simulator's ``POST /_sim/vm-actions`` (plain HTTP on loopback)."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            received.append({"path": self.path, "body": json.loads(body)})
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", received
    finally:
        server.shutdown()
        server.server_close()


def test_the_vm_server_reports_to_the_simulator_through_the_mcp_env(
    e2e: E2ESession, sim_control_plane: tuple[str, list[dict[str, Any]]]
) -> None:
    """The stand-in VM server reports its changes to the simulator named in its MCP env."""
    sim_url, received = sim_control_plane
    e2e.mcp_config = mcp_config(
        e2e.project_dir.parent / "mcp-sim.json", actions_log=e2e.actions_log, sim_url=sim_url
    )
    e2e.script([[call(mcp_tool("list_vms")), call(SNAPSHOT, vms=["web-01", "db-01"])], "ok"])

    run = e2e.run()

    assert run.ok, run.describe()
    assert received == [
        {"path": "/_sim/vm-actions", "body": {"vm": vm, "action": "snapshot_vms",
                                              "tool": "snapshot_vms"}}
        for vm in ("web-01", "db-01")
    ]  # fmt: skip
    assert [a["vm"] for a in e2e.actions()] == ["web-01", "db-01"]  # read-only list_vms: none


def test_the_vm_server_verifies_the_simulator_with_the_ca_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``E2E_SIM_CA`` is the only trust for ``https`` (a self-signed cert made with openssl)."""
    import ssl

    import httpx

    from e2e import vm_mcp_server

    cert, key = tmp_path / "sim.pem", tmp_path / "sim.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=zerto-rewind-e2e-sim", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            received.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        monkeypatch.setenv("E2E_SIM_URL", f"https://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("E2E_VM_ACTIONS_LOG", str(tmp_path / "actions.jsonl"))
        monkeypatch.delenv("E2E_SIM_CA", raising=False)
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            vm_mcp_server.record("web-01", "power_off_vm", {})
        monkeypatch.setenv("E2E_SIM_CA", str(cert))
        vm_mcp_server.record("web-01", "power_off_vm", {})
    finally:
        server.shutdown()
        server.server_close()
    assert received == [{"vm": "web-01", "action": "power_off_vm", "tool": "power_off_vm"}]


def test_the_pinned_inspector_drives_the_vm_server(tmp_path: Path) -> None:
    """The pinned MCP Inspector CLI can call the stand-in VM server."""
    assert INSPECTOR_BIN.exists(), "run: cd tests/e2e && npm ci"
    log = tmp_path / "actions.jsonl"
    out = subprocess.run(
        [str(INSPECTOR_BIN), "--cli", "-e", f"E2E_VM_ACTIONS_LOG={log}",
         sys.executable, str(VM_SERVER),
         "--method", "tools/call", "--tool-name", "power_off_vm", "--tool-arg", "name=web-01"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["structuredContent"] == {"result": "web-01 powered off"}
    assert [(a["vm"], a["action"]) for a in read_actions(log)] == [("web-01", "power_off_vm")]


# -- the harness's own pieces (no CLI) ------------------------------------------------------------


def test_a_missing_cli_is_a_loud_error(tmp_path: Path) -> None:
    """A missing Claude Code CLI is an error naming the install command, never a skip."""
    with pytest.raises(ClaudeMissing, match="npm ci"):
        claude_path(tmp_path / "nope" / "claude")


def test_the_pinned_cli_runs(claude_bin: Path) -> None:
    """The pinned Claude Code CLI is installed where the tests look."""
    assert claude_bin.exists()


@pytest.mark.parametrize(
    ("command", "host"),
    [
        ("ssh admin@jp-ubuntu.lab.local 'sudo reboot'", "jp-ubuntu.lab.local"),
        ("ssh -t -i key.pem root@web-01 uptime", "web-01"),
        ("cd /; /usr/bin/ssh -p 2222 db-01 reboot", "db-01"),
        ("sudo reboot", None),
    ],
)
def test_ssh_host(command: str, host: str | None) -> None:
    """The stand-in finds the ssh host inside a command string."""
    assert ssh_host(command) == host


def test_fake_api_script_position_comes_from_the_conversation() -> None:
    """The fake API picks the next scripted turn from the conversation it is sent."""
    api = FakeAnthropic([[call("a", x=1)], [call("b"), call("c")], "end"])
    tools = [{"name": "a"}]
    kind, turn, content, stop = api.answer({"tools": tools, "messages": [{"role": "user"}]})
    assert (kind, turn, stop) == ("main", 0, "tool_use")
    assert content[0]["name"] == "a"
    first = {"role": "assistant", "content": content}
    _, turn, content, _ = api.answer({"tools": tools, "messages": [first]})
    assert turn == 1
    assert [b["name"] for b in content] == ["b", "c"]
    second = {"role": "assistant", "content": content}
    assert api.answer({"tools": tools, "messages": [first, second]})[1:] == (
        2,
        [{"type": "text", "text": "end"}],
        "end_turn",
    )
    said_end = {"role": "assistant", "content": [{"type": "text", "text": "end"}]}
    assert api.answer({"tools": tools, "messages": [first, second, said_end]})[1] == 3
    # a side request (no tools) never advances the script
    assert api.answer({"messages": [first]})[:2] == ("side", None)
