"""Every deny and ask reason speaks to the human who approves; none tells the agent how to
change the guard (issue 11, section 2).

The reasons are collected from the real guard and hook over the sandbox's rows (the demo's
table, plus the rows reached by settings), the hook's own denials (a broken, a missing, a
changed and an unreadable pinned config, writes to the guard's files) and the doors' fixed
texts; a reason that tells its reader to edit, change, fix or set the config, the catalog,
an environment variable or the settings fails the test.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from zerto_rewind import service_client
from zerto_rewind.cli.demo import DEMO_CATALOG, RETRY, STEPS
from zerto_rewind.config.loader import file_sha256
from zerto_rewind.testing import Sandbox, fast_sim_config

POWER_OFF = "mcp__vsphere__power_off_vm"
_VERBS = (
    r"edit|change|fix|set|unset|export|add|append|update|modify|point|create|remove|rename|"
    r"put|list|declare|raise|lower|switch|turn"
)
_OBJECTS = (
    r"config|catalog|ZERTO_[A-Z_]+|environment|variable|settings|vm_arg|read_only_tools|"
    r"unknown_tools|protect_self|guard\.\w+"
)
# An instruction: a clause that starts with one of the verbs (an imperative: "fix the
# config", "; add it to the catalog", "then set ZERTO_HOOK_UNKNOWN") and names the guard's
# knobs before the clause ends, or "you can/should <verb> …". "set by X" is a description.
_CLAUSE = r"(?:(?![.;!?](?:\s|$)).)*?"  # to the end of the clause; a path's dots stay inside
IMPERATIVE = re.compile(
    rf"(?:^|[.;:!?(]\s*|\bthen\s+|,\s+|\bplease\s+)(?:{_VERBS})\b(?!\s+by\b){_CLAUSE}"
    rf"\b(?:{_OBJECTS})",
    re.IGNORECASE,
)
YOU_CAN = re.compile(
    rf"\byou\s+(?:can|could|may|should|must|need to)\s+(?:{_VERBS})\b{_CLAUSE}\b(?:{_OBJECTS})",
    re.IGNORECASE,
)


def instructions(reason: str) -> list[str]:
    """The parts of ``reason`` that tell the reader to change the guard."""
    return [m.group(0) for m in (*IMPERATIVE.finditer(reason), *YOU_CAN.finditer(reason))]


def test_the_check_catches_the_old_wordings() -> None:
    for old in (
        "zerto-rewind denied X: fix the config: /c.json: tools: bad glob",
        "(unlisted tools: prompt, set by default). Add it to the catalog to have it guarded.",
        "no VM found; fix vm_arg for this tool in the zerto-rewind config",
        "to let it run, set ZERTO_HOOK_UNKNOWN=allow",
        "You can edit ~/.claude/settings.json to remove the hook.",
    ):
        assert instructions(old), old
    for fine in (
        "(unlisted tools: prompt, set by ZERTO_HOOK_UNKNOWN). An operator can add this tool to "
        "the guard's catalog to have it checkpointed.",
        "Approve only if you accept a change with no rewind point; an operator can check where "
        "the guard's catalog looks for this tool's VM.",
    ):
        assert instructions(fine) == [], fine


@pytest.fixture
def aws_box(tmp_path: Path) -> Iterator[Sandbox]:
    config = fast_sim_config(cadences={"vcenter": 2.0, "hyperv": 2.0, "azure": 6.0, "aws": 12.0})
    # The demo's steps name mcvsphere's tools; the rows below, the sandbox's stand-in's.
    catalog = {**DEMO_CATALOG, "tools": {**DEMO_CATALOG["tools"], POWER_OFF: {"vm_arg": "name"}}}
    root = str(tmp_path / "aws")
    with Sandbox(root, sim_config=config, guard={"timeout_s": 4}, catalog=catalog) as box:
        yield box


def collect(box: Sandbox, reasons: dict[str, str], name: str, *args: object, **kw: object) -> None:
    run = box.run_hook(*args, **kw)  # type: ignore[arg-type]
    if run.decision in ("deny", "ask"):
        reasons[name] = run.reason


def test_no_reason_the_guard_gives_tells_the_agent_to_change_the_guard(
    aws_box: Sandbox, tmp_path: Path
) -> None:
    box = aws_box
    reasons: dict[str, str] = {}
    for step in (*STEPS, RETRY):
        if step is not RETRY and step.tool_input.get("name") == "win2019-1":
            # as the demo does: the next AWS checkpoint a whole cadence away, so the tag
            # lands past the 4 s budget however fast the earlier steps ran
            box.wait_past_boundary("CMH-AWS-1")
        collect(box, reasons, step.situation, step.tool, step.tool_input)
    env = box.env(ZERTO_HOOK_UNKNOWN="deny")
    collect(box, reasons, "unlisted, denied", "mcp__x__y", {}, env=env)
    # rows reached through the catalog's own settings
    tools = {
        **box.catalog["tools"],
        "mcp__vsphere__reconfigure_host": {"vpgs": ["no-such-vpg"]},
        "mcp__vsphere__wipe": {"vm_arg": "name", "decision": "deny"},
        "mcp__vsphere__bulk": {"decision": "deny"},
    }
    box.write_config(tools=tools, guard={"timeout_s": 4, "prompt_as": "deny"})
    collect(box, reasons, "host tool, VPG unknown", "mcp__vsphere__reconfigure_host", {})
    collect(box, reasons, "no VM, policy deny", "mcp__vsphere__wipe", {"force": True})
    collect(box, reasons, "no vm_arg, policy deny", "mcp__vsphere__bulk", {})
    collect(box, reasons, "unknown VM as deny", POWER_OFF, {"name": "ghost-vm"})
    box.write_config()
    # the ZVM failing: an error status, then a hang past the budget (the watchdog's text)
    box.control("POST", "/_sim/faults", {"route": "vms.list", "kind": "status", "status": 500})
    collect(box, reasons, "ZVM error", POWER_OFF, {"name": "web-01"})
    box.control("DELETE", "/_sim/faults")
    box.control("POST", "/_sim/faults", {"route": "vpgs.get", "kind": "hang"})
    box.write_config(guard={"timeout_s": 2})
    collect(box, reasons, "ZVM hangs", POWER_OFF, {"name": "jp-ubuntu"})
    box.control("DELETE", "/_sim/faults")
    # the hook's own denials: config broken, missing, changed since install, unreadable
    pinned = ("--config", box.config_path, "--config-sha256", file_sha256(box.config_path))
    box.write_config(guard={"on_pending": "wait"})
    collect(box, reasons, "config invalid", POWER_OFF, {"name": "jp-ubuntu"})
    collect(box, reasons, "config changed", POWER_OFF, {"name": "jp-ubuntu"}, hook_args=pinned)
    missing = box.env(ZERTO_REWIND_CONFIG=box.config_path + ".missing")
    collect(box, reasons, "config missing", "mcp__vsphere__list_vms", {}, env=missing)
    os.remove(box.config_path)
    collect(box, reasons, "pinned unreadable", POWER_OFF, {"name": "x"}, hook_args=pinned)
    box.write_config(tools={POWER_OFF: {"vm_arg": {"path": "c", "pattern": "ssh (\\S+"}}})
    collect(box, reasons, "bad vm_arg pattern", POWER_OFF, {"c": "ssh x"})
    box.write_config()
    # writes to the guard's own files
    settings = str(tmp_path / "project" / ".claude" / "settings.json")
    hook = ("--config", box.config_path, "--settings", settings)
    edit = {"command": f"sed -i s/power_off/list/ {box.config_path}"}
    collect(box, reasons, "Bash on the config", "Bash", edit, hook_args=hook)
    write = {"file_path": settings, "content": "{}"}
    collect(box, reasons, "Write on the settings", "Write", write, hook_args=hook)

    expected = {
        "failed (VPG paused)", "pending (AWS cadence)", "VM unknown to Zerto",
        "no VM in arguments", "unlisted tool", "unlisted, denied", "host tool, VPG unknown",
        "no VM, policy deny", "no vm_arg, policy deny", "unknown VM as deny", "ZVM error",
        "ZVM hangs", "config invalid", "config changed", "config missing", "pinned unreadable",
        "bad vm_arg pattern", "Bash on the config", "Write on the settings",
    }  # fmt: skip
    assert expected <= set(reasons), sorted(expected - set(reasons))
    # The demo's tool is in the catalog: its steps are decided as mutating, not unlisted.
    assert "not in the zerto-rewind catalog" not in reasons["VM unknown to Zerto"]
    bad = {name: instructions(text) for name, text in reasons.items() if instructions(text)}
    assert bad == {}, json.dumps(bad, indent=2)
    for text in reasons.values():
        assert text.startswith(("zerto-rewind", "mcp__", "Bash", "Write")), text


def test_the_doors_fixed_texts_tell_no_one_to_change_the_guard() -> None:
    from zerto_rewind.core.decision import ToolCall
    from zerto_rewind.core.tagging import overdue_reason
    from zerto_rewind.gateway import calls
    from zerto_rewind.gateway.service import refusal_for_error
    from zerto_rewind.hooks import claude_code, thin

    texts = [
        json.loads(thin._deny(claude_code, "mcp__v__t", "unix:/run/zr.sock", "refused"))[
            "hookSpecificOutput"
        ]["permissionDecisionReason"],
        refusal_for_error(ToolCall("mcp__v__t", {}), RuntimeError("boom")).reason,
        *calls._PROMPT_ENDINGS.values(),
        *_identity_denials(thin, claude_code),
    ]
    from zerto_rewind.core.state import TagRecord

    texts.append(overdue_reason(TagRecord("t", 0.0, 1.0, 2.0)))
    texts.extend(_host_path_reasons())
    bad = {text: instructions(text) for text in texts if instructions(text)}
    assert bad == {}


def _host_path_reasons() -> list[str]:
    """The host_path row's prompt (as logged and as the approver reads it) and its deny."""
    from zerto_rewind.config.settings import CatalogSettings, ToolSpec
    from zerto_rewind.core.catalog import classify
    from zerto_rewind.core.decision import ToolCall
    from zerto_rewind.core.guard import host_path_decision

    texts = []
    for decision in ("allow", "deny"):
        spec = ToolSpec("mcp__v__download", (), None, decision=decision, host_paths=("save_to",))
        catalog = CatalogSettings((), {spec.name: spec}, None, "prompt", "default")
        call = ToolCall(spec.name, {"save_to": "/etc/zerto-rewind/config.json"})
        answer = host_path_decision(call, classify(call.tool_name, call.tool_input, catalog))
        texts += [answer.reason, answer.for_approver()]
    return texts


def _identity_denials(thin: Any, host: Any) -> list[str]:
    """The thin hook's denials for a socket it cannot trust: no identity, wrong uid, unknown."""

    class Peer:
        def getsockopt(self, level: int, option: int, size: int) -> bytes:
            return (4242).to_bytes(4, sys.byteorder) + (1001).to_bytes(4, sys.byteorder) * 2

    texts = []
    for user in ("", "0", "zr-no-such-user"):
        try:
            service_client.check_peer(Peer(), "/run/zr.sock", user)
        except service_client.ServiceIdentityError as exc:
            rendered = json.loads(thin._deny_identity(host, "mcp__v__t", exc))
            texts.append(rendered["hookSpecificOutput"]["permissionDecisionReason"])
    assert len(texts) == 3
    return texts
