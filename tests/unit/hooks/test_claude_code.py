"""Claude Code's PreToolUse protocol: parsing stdin, rendering outcomes (hosts/claude_code.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerto_rewind.hooks.claude_code import (
    MAX_INPUT_BYTES,
    HookInputError,
    parse_input,
    render,
)

PAYLOAD = {
    "session_id": "0f3c9a1e-77aa-4bd0-9d8e-123456789abc",
    "transcript_path": "/tmp/t.jsonl",
    "cwd": "/work",
    "permission_mode": "bypassPermissions",
    "hook_event_name": "PreToolUse",
    "tool_name": "mcp__vsphere__power_off",
    "tool_input": {"name": "web01", "force": True},
    "tool_use_id": "toolu_01",
}


def encode(raw: Any) -> bytes:
    """The payload as Claude Code writes it on stdin."""
    return json.dumps(raw).encode()


# -------------------------------------------------------------------------- parsing


def test_parse_full_payload() -> None:
    """A real PreToolUse payload yields the fields the guard uses."""
    hook_input = parse_input(encode(PAYLOAD))
    assert hook_input.tool_name == "mcp__vsphere__power_off"
    assert hook_input.tool_input == {"name": "web01", "force": True}
    assert hook_input.session_id == PAYLOAD["session_id"]
    assert hook_input.tool_use_id == "toolu_01"
    assert hook_input.permission_mode == "bypassPermissions"


def test_parse_minimal_payload() -> None:
    """Only tool_name is required; event defaults to PreToolUse, tool_input to {}."""
    hook_input = parse_input(b'{"tool_name": "Bash"}')
    assert (hook_input.tool_name, hook_input.tool_input) == ("Bash", {})
    assert (hook_input.session_id, hook_input.tool_use_id, hook_input.permission_mode) == (
        None,
        None,
        None,
    )


def test_non_string_optional_fields_become_none() -> None:
    """Optional ids of the wrong type are dropped rather than trusted."""
    hook_input = parse_input(encode({"tool_name": "x", "session_id": 5, "tool_use_id": ["a"]}))
    assert (hook_input.session_id, hook_input.tool_use_id) == (None, None)


def test_utf8_bom_and_unicode_accepted() -> None:
    """A UTF-8 BOM and non-ASCII arguments are accepted."""
    data = b"\xef\xbb\xbf" + json.dumps({"tool_name": "t", "tool_input": {"n": "vm-é"}}).encode()
    assert parse_input(data).tool_input == {"n": "vm-é"}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"tool_name": "x", "tool_input": {"a": NaN}}', "not valid JSON"),
        (b"[]", "must be a JSON object"),
        (b'"PreToolUse"', "must be a JSON object"),
        (b"null", "must be a JSON object"),
        (b'{"hook_event_name": "Stop", "tool_name": "x"}', "PostToolUseFailure only"),
        (b'{"hook_event_name": null, "tool_name": "x"}', "PostToolUseFailure only"),
        (b"{}", "no tool_name"),
        (b'{"tool_name": ""}', "no tool_name"),
        (b'{"tool_name": "   "}', "no tool_name"),
        (b'{"tool_name": 3}', "no tool_name"),
        (b'{"tool_name": "x", "tool_input": []}', "tool_input must be a JSON object"),
        (b'{"tool_name": "x", "tool_input": "rm -rf"}', "tool_input must be a JSON object"),
        (b'{"tool_name": "x", "tool_input": null}', "tool_input must be a JSON object"),
    ],
)
def test_invalid_input_is_hook_input_error(data: bytes, problem: str) -> None:
    """Anything but a PreToolUse object with a tool_name raises HookInputError saying what."""
    with pytest.raises(HookInputError, match=problem):
        parse_input(data)


@pytest.mark.parametrize(
    ("event", "response", "result"),
    [
        ("PostToolUse", {"content": [{"type": "text", "text": "done"}]}, "succeeded"),
        ("PostToolUse", {"isError": True, "content": []}, "failed"),
        ("PostToolUse", "plain text answer", "succeeded"),
        ("PostToolUseFailure", None, "failed"),
        ("PostToolUseFailure", {"isError": False}, "failed"),
    ],
)
def test_a_post_event_says_the_call_result(event: str, response: Any, result: str) -> None:
    """After the call: the event and an MCP answer's isError give its result."""
    payload = {**PAYLOAD, "hook_event_name": event, "tool_response": response}
    hook_input = parse_input(encode(payload))
    assert (hook_input.event, hook_input.result) == (event, result)
    assert hook_input.tool_use_id == "toolu_01"


def test_a_pre_event_has_no_result() -> None:
    """Before the call there is nothing to record."""
    hook_input = parse_input(encode(PAYLOAD))
    assert (hook_input.event, hook_input.result) == ("PreToolUse", None)


def test_oversized_input_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Input over the size bound is refused with its size, without being decoded."""
    from zerto_rewind import _fastjson

    def never(_data: object) -> object:
        raise AssertionError("oversized input was decoded")

    monkeypatch.setattr(_fastjson, "loads", never)
    body = encode(PAYLOAD)  # a valid payload, padded one byte past the bound
    data = body + b" " * (MAX_INPUT_BYTES + 1 - len(body))
    expected = f"hook input is {MAX_INPUT_BYTES + 1} bytes, more than the {MAX_INPUT_BYTES}"
    with pytest.raises(HookInputError, match=expected):
        parse_input(data)
    with pytest.raises(AssertionError, match="decoded"):  # the bound itself is still parsed
        parse_input(data[:MAX_INPUT_BYTES])


def test_hook_input_error_is_a_value_error() -> None:
    """HookInputError is a ValueError, so generic handlers still see it as bad input."""
    assert issubclass(HookInputError, ValueError)


# ------------------------------------------------------------------------- rendering


def output_of(text: str) -> dict[str, Any]:
    """The hookSpecificOutput object of a rendered answer."""
    body = json.loads(text)
    assert set(body) == {"hookSpecificOutput"}
    specific: dict[str, Any] = body["hookSpecificOutput"]
    assert specific["hookEventName"] == "PreToolUse"
    return specific


def test_none_prints_nothing() -> None:
    """Outcome none: exit 0 with empty stdout, never an explicit allow."""
    assert render("none", "ignored", "ignored") == ""
    assert render("none", "", "", prompt_as="deny") == ""


def test_context_gives_additional_context_only() -> None:
    """Outcome context: additionalContext, and no permissionDecision (never allow)."""
    context = "Checkpoint 7180 tagged 'zr web01' on VPG vpg-a at 2024-01-01T00:00:00Z"
    text = render("context", "", context)
    assert output_of(text) == {"hookEventName": "PreToolUse", "additionalContext": context}


def test_deny_carries_reason() -> None:
    """Outcome deny: permissionDecision deny with the reason for the model."""
    text = render("deny", "checkpoint failed: VPG paused; resume it and retry", "")
    assert output_of(text) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "checkpoint failed: VPG paused; resume it and retry",
    }


@pytest.mark.parametrize(("prompt_as", "decision"), [("ask", "ask"), ("deny", "deny")])
def test_prompt_is_ask_or_deny(prompt_as: str, decision: str) -> None:
    """Outcome prompt: ask, or deny when guard.prompt_as is deny; the reason is kept."""
    text = render("prompt", "VM web01 unknown to Zerto", "", prompt_as=prompt_as)
    specific = output_of(text)
    assert specific["permissionDecision"] == decision
    assert specific["permissionDecisionReason"] == "VM web01 unknown to Zerto"


@pytest.mark.parametrize("prompt_as", ["ask", "deny"])
def test_defer_is_defer(prompt_as: str) -> None:
    """Outcome defer: permissionDecision defer, whatever prompt_as says."""
    text = render("defer", "tag pending; retry after 12:00:05Z", "", prompt_as=prompt_as)
    assert output_of(text)["permissionDecision"] == "defer"


@pytest.mark.parametrize("outcome", ["allow", "", "ALLOW", "approve", "None"])
def test_unknown_outcome_denies(outcome: str) -> None:
    """An outcome the adapter does not know is a deny that says so, never an allow."""
    text = render(outcome, "original reason", "")
    specific = output_of(text)
    assert specific["permissionDecision"] == "deny"
    assert repr(outcome) in specific["permissionDecisionReason"]
    assert specific["permissionDecisionReason"].endswith("original reason")


@pytest.mark.parametrize("outcome", ["none", "context", "deny", "prompt", "defer", "allow"])
def test_no_outcome_ever_renders_allow(outcome: str) -> None:
    """No outcome, with any prompt_as, produces permissionDecision allow."""
    for prompt_as in ("ask", "deny"):
        text = render(outcome, "r", "c", prompt_as=prompt_as)
        if text:
            assert output_of(text).get("permissionDecision") != "allow"


def test_non_ascii_reason_survives() -> None:
    """Reasons with non-ASCII text and quotes are valid JSON that round-trips."""
    reason = 'VM "wéb01" — tag «pending»\nretry'
    text = render("deny", reason, "")
    assert output_of(text)["permissionDecisionReason"] == reason
