"""Each host's protocol: stdin → the call in the catalog's names; an outcome → its answer."""

from __future__ import annotations

import json
from types import ModuleType
from typing import Any

import pytest

from zerto_rewind.hooks import codex, copilot, gemini
from zerto_rewind.hooks.calls import FILES, MCP, SHELL, HookInputError, split_server

PATCH = """*** Begin Patch
*** Update File: src/app.py
@@
-a
+b
*** Add File: /root/.codex/hooks.json
+{}
*** Delete File: old.txt
*** Update File: a.txt
*** Move to: b.txt
*** End Patch
"""


def raw(**fields: Any) -> bytes:
    return json.dumps(fields).encode()


# ------------------------------------------------------------------ parse: Codex


def test_codex_mcp_names_are_the_catalogs_own() -> None:
    call = codex.parse(
        raw(
            hook_event_name="PreToolUse",
            tool_name="mcp__vsphere__power_off_vm",
            tool_input={"name": "jp-ubuntu"},
            session_id="s1",
            tool_use_id="t1",
            cwd="/w",
        )
    )
    assert (call.kind, call.tool_name, call.tool_input) == (
        MCP,
        "mcp__vsphere__power_off_vm",
        {"name": "jp-ubuntu"},
    )
    body = json.loads(call.payload())
    assert body == {
        "hook_event_name": "PreToolUse",
        "tool_name": "mcp__vsphere__power_off_vm",
        "tool_input": {"name": "jp-ubuntu"},
        "session_id": "s1",
        "tool_use_id": "t1",
        "cwd": "/w",
    }


def test_codex_bash_is_a_shell_call() -> None:
    call = codex.parse(raw(tool_name="Bash", tool_input={"command": "ls -la"}))
    assert (call.kind, call.tool_name, call.command) == (SHELL, "Bash", "ls -la")


def test_codex_apply_patch_names_every_file_it_writes() -> None:
    call = codex.parse(raw(tool_name="apply_patch", tool_input={"command": PATCH}))
    assert call.kind == FILES
    assert call.paths == ("src/app.py", "/root/.codex/hooks.json", "old.txt", "a.txt", "b.txt")


def test_codex_apply_patch_as_an_argv_list_is_read_too() -> None:
    call = codex.parse(raw(tool_name="apply_patch", tool_input={"command": ["apply_patch", PATCH]}))
    assert "/root/.codex/hooks.json" in call.paths


def test_codex_write_alias_is_a_file_call() -> None:
    call = codex.parse(raw(tool_name="Write", tool_input={"file_path": "/x/y"}))
    assert (call.kind, call.paths) == (FILES, ("/x/y",))


# ------------------------------------------------------------------ parse: Gemini


def test_gemini_mcp_context_gives_the_server_and_the_tool() -> None:
    call = gemini.parse(
        raw(
            hook_event_name="BeforeTool",
            tool_name="mcp_vm_prod_power_off_vm",
            tool_input={"name": "a"},
            mcp_context={"server_name": "vm_prod", "tool_name": "power_off_vm"},
        )
    )
    assert call.tool_name == "mcp__vm_prod__power_off_vm"


def test_gemini_without_mcp_context_splits_on_the_longest_server() -> None:
    call = gemini.parse(raw(tool_name="mcp_vm_prod_power_off", tool_input={}), ("vm", "vm_prod"))
    assert call.tool_name == "mcp__vm_prod__power_off"


def test_gemini_an_unsplittable_mcp_name_stays_as_gemini_named_it() -> None:
    call = gemini.parse(raw(tool_name="mcp_other_thing", tool_input={}), ("vsphere",))
    assert (call.kind, call.tool_name) == (MCP, "mcp_other_thing")


def test_gemini_shell_and_file_tools() -> None:
    shell = gemini.parse(raw(tool_name="run_shell_command", tool_input={"command": "rm x"}))
    assert (shell.kind, shell.command) == (SHELL, "rm x")
    for tool in ("write_file", "replace"):
        call = gemini.parse(raw(tool_name=tool, tool_input={"file_path": "/a/b"}))
        assert (call.kind, call.tool_name, call.paths) == (FILES, "Write", ("/a/b",))


# ------------------------------------------------------------------ parse: Copilot


def test_copilot_splits_server_and_tool_longest_prefix_first() -> None:
    data = raw(toolName="vm-prod-power_off", toolArgs={"name": "a"}, sessionId="s", cwd="/w")
    call = copilot.parse(data, ("vm", "vm-prod"))
    assert (call.tool_name, call.session_id, call.cwd) == ("mcp__vm-prod__power_off", "s", "/w")
    assert copilot.parse(data, ("vm",)).tool_name == "mcp__vm__prod-power_off"


def test_copilot_tool_args_as_a_json_string() -> None:
    call = copilot.parse(
        raw(toolName="vsphere-power_off_vm", toolArgs='{"name": "jp"}'), ("vsphere",)
    )
    assert call.tool_input == {"name": "jp"}


def test_copilot_an_mcp_name_of_no_known_server_is_unlisted() -> None:
    call = copilot.parse(raw(toolName="other-power_off", toolArgs={}), ("vsphere",))
    assert (call.kind, call.tool_name) == (MCP, "other-power_off")


def test_copilot_shell_and_file_tools_and_the_pascal_case_form() -> None:
    shell = copilot.parse(raw(toolName="bash", toolArgs={"command": "ls"}))
    assert (shell.kind, shell.command) == (SHELL, "ls")
    edit = copilot.parse(raw(toolName="edit", toolArgs={"path": "/a"}))
    assert (edit.kind, edit.paths) == (FILES, ("/a",))
    pascal = copilot.parse(
        raw(hook_event_name="PreToolUse", tool_name="create", tool_input={"path": "/b"})
    )
    assert pascal.paths == ("/b",)


def test_split_server_needs_a_tool_after_the_server() -> None:
    assert split_server("vsphere-", "", ("vsphere",), "-") is None
    assert split_server("mcp_x_y", "mcp_", ("x",), "_") == "mcp__x__y"


# ------------------------------------------------------------------ bad stdin


@pytest.mark.parametrize("host", [codex, gemini, copilot], ids=lambda h: h.PROTOCOL.name)
@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"[1]",
        raw(tool_input={}),
        raw(tool_name="x", tool_input=[1]),
        raw(toolName="x", toolArgs="not an object"),
    ],
    ids=["not-json", "not-object", "no-name", "input-list", "args-string"],
)
def test_bad_stdin_is_a_hook_input_error(host: ModuleType, data: bytes) -> None:
    if host is not copilot and b"toolName" in data:
        data = raw(tool_name="x", tool_input="not an object")
    with pytest.raises(HookInputError):
        host.parse(data)


@pytest.mark.parametrize(
    ("host", "event"), [(codex, "Stop"), (gemini, "BeforeModel"), (copilot, "sessionStart")]
)
def test_another_event_is_refused(host: ModuleType, event: str) -> None:
    with pytest.raises(HookInputError, match="only"):
        host.parse(raw(hook_event_name=event, tool_name="x", toolName="x"))


# ------------------------------------------------------------------ parse: after the call


def test_codex_post_tool_use_says_what_became_of_the_call() -> None:
    """PostToolUse: succeeded, unless its tool_response is an MCP error answer."""
    ids = {"session_id": "s", "tool_use_id": "c1", "tool_name": "mcp__vm__power_off",
           "tool_input": {"name": "web-01"}, "hook_event_name": "PostToolUse"}  # fmt: skip
    call = codex.parse(raw(**ids, tool_response={"content": []}))
    assert (call.kind, call.tool_name, call.tool_use_id, call.result) == (
        MCP, "mcp__vm__power_off", "c1", "succeeded")  # fmt: skip
    assert codex.parse(raw(**ids, tool_response={"isError": True})).result == "failed"
    assert codex.parse(raw(**{**ids, "hook_event_name": "PreToolUse"})).result is None


def test_gemini_after_tool_says_what_became_of_the_call() -> None:
    """AfterTool: failed when its tool_response carries an error; the MCP name as before."""
    ids = {"session_id": "s", "tool_name": "mcp_vm_power_off", "tool_input": {},
           "hook_event_name": "AfterTool",
           "mcp_context": {"server_name": "vm", "tool_name": "power_off"}}  # fmt: skip
    call = gemini.parse(raw(**ids, tool_response={"llmContent": "ok", "error": None}))
    assert (call.tool_name, call.result) == ("mcp__vm__power_off", "succeeded")
    failed = gemini.parse(raw(**ids, tool_response={"error": {"message": "boom"}}))
    assert failed.result == "failed"
    assert gemini.parse(raw(**{**ids, "hook_event_name": "BeforeTool"})).result is None


def test_copilot_post_events_say_what_became_of_the_call() -> None:
    """postToolUse reads toolResult's resultType; postToolUseFailure is failed; a payload
    that names no event but carries a toolResult is a postToolUse, never a new call."""
    ids = {"sessionId": "s", "toolCallId": "t1", "toolName": "vm-power_off", "toolArgs": "{}"}
    ok = copilot.parse(raw(**ids, toolResult={"resultType": "success"}), ("vm",))
    assert (ok.tool_name, ok.tool_use_id, ok.result) == ("mcp__vm__power_off", "t1", "succeeded")
    bad = copilot.parse(raw(**ids, toolResult={"resultType": "failure"}), ("vm",))
    assert bad.result == "failed"
    failure = copilot.parse(raw(**ids, hookEventName="postToolUseFailure"), ("vm",))
    assert failure.result == "failed"
    assert copilot.parse(raw(**ids), ("vm",)).result is None


def test_a_post_event_of_a_host_tool_is_still_that_tool() -> None:
    """A shell call's after event stays a shell call (the thin hook posts nothing for it)."""
    call = codex.parse(raw(hook_event_name="PostToolUse", tool_name="Bash",
                           tool_input={"command": "ls"}, tool_response={}))  # fmt: skip
    assert (call.kind, call.result) == (SHELL, "succeeded")


def test_blocking_errors_block_in_each_host() -> None:
    out, err, code = codex.blocking("bad input")
    assert (out, err, code) == ("", "bad input", 2)  # Codex: exit 2 with a non-empty stderr
    assert codex.blocking("")[1]  # never an empty stderr: that would not block
    out, err, code = gemini.blocking("bad input")
    assert (json.loads(out), err, code) == (
        {"decision": "deny", "reason": "bad input"},
        "bad input",
        2,
    )
    out, err, code = copilot.blocking("bad input")
    assert json.loads(out)["permissionDecision"] == "deny"
    assert code == 2


# ------------------------------------------------------------------ render


def test_codex_render_every_outcome() -> None:
    assert codex.render("none", "", "") == ""
    ctx = json.loads(codex.render("context", "", "checkpoint cp-1"))["hookSpecificOutput"]
    assert ctx == {"hookEventName": "PreToolUse", "additionalContext": "checkpoint cp-1"}
    for outcome in ("deny", "prompt", "defer", "weird"):
        out = json.loads(codex.render(outcome, "VM ghost unknown", ""))["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny"
        assert out["permissionDecisionReason"].strip()
    prompt = json.loads(codex.render("prompt", "VM ghost unknown", ""))["hookSpecificOutput"]
    assert "a Codex hook cannot ask" in prompt["permissionDecisionReason"]
    assert "VM ghost unknown" in prompt["permissionDecisionReason"]
    weird = json.loads(codex.render("weird", "r", ""))["hookSpecificOutput"]
    assert "unknown guard outcome" in weird["permissionDecisionReason"]


def test_codex_deny_never_has_an_empty_reason() -> None:
    out = json.loads(codex.render("deny", "", ""))["hookSpecificOutput"]
    assert out["permissionDecisionReason"]


def test_gemini_render_every_outcome_and_the_prompt_option() -> None:
    assert gemini.render("none", "", "") == ""
    ctx = json.loads(gemini.render("context", "", "checkpoint cp-1"))
    assert ctx["hookSpecificOutput"]["additionalContext"] == "checkpoint cp-1"
    assert ctx["systemMessage"] == "checkpoint cp-1"
    assert "decision" not in ctx  # never allow: Gemini's own confirmation still applies
    assert json.loads(gemini.render("deny", "paused", "")) == {
        "decision": "deny",
        "reason": "paused",
    }
    assert json.loads(gemini.render("prompt", "unknown VM", "")) == {
        "decision": "ask",
        "reason": "unknown VM",
    }
    unattended = json.loads(gemini.render("prompt", "unknown VM", "", prompt_as="deny"))
    assert unattended["decision"] == "deny"
    assert "unknown VM" in unattended["reason"]
    assert json.loads(gemini.render("defer", "later", ""))["decision"] == "deny"


def test_copilot_render_every_outcome() -> None:
    assert copilot.render("none", "", "") == ""
    assert json.loads(copilot.render("context", "", "checkpoint")) == {
        "additionalContext": "checkpoint"
    }  # no permissionDecision: never allow
    for outcome in ("deny", "prompt", "defer", "weird"):
        out = json.loads(copilot.render(outcome, "why", ""))
        assert out["permissionDecision"] == "deny"
        assert "why" in out["permissionDecisionReason"]
    prompt = json.loads(copilot.render("prompt", "why", "", prompt_as="ask"))
    assert prompt["permissionDecision"] == "deny"  # Copilot's ask does not hold


# ------------------------------------------------------------------ the one table of hosts


def test_each_host_name_is_its_protocol_modules_own() -> None:
    """The thin hook's --host values are hook_flags' table (the gateway's result endpoint
    takes the same), each naming the protocol module of that host, the default first."""
    from zerto_rewind.hook_flags import HOST_NAMES
    from zerto_rewind.hooks import thin

    assert tuple(thin.HOSTS) == HOST_NAMES
    assert {name: module.PROTOCOL.name for name, module in thin.HOSTS.items()} == {
        name: name for name in HOST_NAMES
    }
    assert thin.DEFAULT_HOST == "claude-code"
