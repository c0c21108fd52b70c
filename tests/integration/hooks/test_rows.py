"""Every row of the decision table, through the hook as a subprocess, against the simulator."""

from __future__ import annotations

import json
import time

import pytest

from zerto_rewind.testing import Sandbox

POWER_OFF = "mcp__vsphere__power_off_vm"


def tagged_checkpoints(box: Sandbox, vpg_name: str) -> dict[str, str]:
    """{checkpoint id: tag} of the VPG's tagged checkpoints, read over the ZVM API."""
    with box.client() as client:
        vpg = client.find_vpg(vpg_name)
        return {c.cp_id: c.tag for c in client.list_checkpoints(vpg.vpg_id) if c.tag}


def test_read_only_call_exits_silently_and_logs_nothing(box: Sandbox) -> None:
    """A read-only tool: exit 0, nothing on stdout, no tag, no log line."""
    run = box.run_hook("mcp__vsphere__get_vm", {"name": "jp-ubuntu"})
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
    assert box.tag_requests() == 0
    assert box.log_records() == []


def test_confirmed_checkpoint_allows_with_context(box: Sandbox) -> None:
    """jp-ubuntu: a tag lands, the call runs, and the model is told how to rewind."""
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id="abcdef1234567890")
    out = run.output
    assert run.returncode == 0
    assert out is not None
    assert "permissionDecision" not in out, "row none must never emit allow"
    context = out["additionalContext"]
    record = box.log_records()[-1]
    assert record["row"] == "confirmed"
    assert record["decision"] == "context"
    checkpoint, tag = record["checkpoint_ids"][0], record["tags"][0]
    assert tagged_checkpoints(box, "jp-local")[checkpoint] == tag
    for expected in (
        "jp-ubuntu",
        "jp-local",
        checkpoint,
        tag,
        record["landed_at"],
        "`zerto-rewind checkpoints jp-ubuntu --tagged`",
        f"`zerto-rewind rewind --vm jp-ubuntu --before {record['landed_at']} --dry-run`",
    ):
        assert expected in context
    # zerto-rewind's MCP server is not installed here: no MCP tool is named
    assert "zerto_recovery_plan" not in context
    assert "s=abcdef12" in tag
    assert "power_off_vm" in tag


def test_rewind_hint_names_the_mcp_tool_only_when_the_server_is_installed(box: Sandbox) -> None:
    """install --with-mcp-server adds --mcp-server NAME to the hook: the hint names that tool."""
    plain = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, tool_use_id="toolu_hint_1")
    served = box.run_hook(
        POWER_OFF,
        {"name": "jp-ubuntu"},
        tool_use_id="toolu_hint_2",
        hook_args=("--mcp-server", "zerto-rewind"),
    )
    assert plain.output is not None
    assert served.output is not None
    without, with_server = plain.output["additionalContext"], served.output["additionalContext"]
    assert "zerto-rewind checkpoints jp-ubuntu --tagged" in without
    assert "recover VPG 'jp-local' to checkpoint" in without
    assert "MCP tool" not in without
    assert "the MCP tool mcp__zerto-rewind__zerto_recovery_plan(vm='jp-ubuntu'" in with_server
    # the flag changes only the hint: same row, no permission decision either way
    assert "permissionDecision" not in served.output
    assert [r["row"] for r in box.log_records()[-2:]] == ["confirmed", "confirmed"]


def test_paused_vpg_is_refused_fast_with_the_zvm_reason(box: Sandbox) -> None:
    """sql-paused-1: denied in under 3 s, saying replication is paused and what to do."""
    run = box.run_hook(POWER_OFF, {"name": "sql-paused-1"})
    assert run.decision == "deny"
    assert run.elapsed_s < 3.0
    assert "paused" in run.reason
    assert "resume" in run.reason.lower()
    assert box.tag_requests("paused-vpg") == 0
    assert box.log_records()[-1]["row"] == "failed"


def test_unknown_vm_prompts(box: Sandbox) -> None:
    """A VM no VPG protects: ask, naming the VM."""
    run = box.run_hook(POWER_OFF, {"name": "ghost-vm"})
    assert run.decision == "ask"
    assert "ghost-vm" in run.reason
    assert box.log_records()[-1]["row"] == "vm_unknown"


def test_no_vm_in_arguments_prompts(box: Sandbox) -> None:
    """A mutating call whose vm_arg matches nothing: ask, naming the path tried."""
    run = box.run_hook(POWER_OFF, {"force": True})
    assert run.decision == "ask"
    assert "name" in run.reason
    assert box.log_records()[-1]["row"] == "no_vm"


@pytest.mark.parametrize(
    ("variable", "expected"),
    [(None, "ask"), ("prompt", "ask"), ("allow", "none"), ("deny", "deny")],
)
def test_unlisted_tool_follows_zerto_hook_unknown(
    box: Sandbox, variable: str | None, expected: str
) -> None:
    """An unlisted tool: ask by default; ZERTO_HOOK_UNKNOWN switches it to allow or deny."""
    env = box.env(**({"ZERTO_HOOK_UNKNOWN": variable} if variable else {}))
    run = box.run_hook("mcp__vsphere__delete_datastore", {"datastore": "ds1"}, env=env)
    assert run.decision == expected
    record = box.log_records()[-1]
    assert record["row"] == "unlisted"
    assert record["decision"] == {"ask": "prompt", "none": "none", "deny": "deny"}[expected]


def test_zerto_hook_unknown_beats_the_config(box: Sandbox) -> None:
    """The config may set unlisted tools to deny; the environment variable wins."""
    box.write_config(unknown_tools="deny")
    assert box.run_hook("mcp__x__y", {}).decision == "deny"
    assert box.run_hook("mcp__x__y", {}, env=box.env(ZERTO_HOOK_UNKNOWN="allow")).decision == "none"


def test_prompt_as_deny_turns_every_prompt_into_deny(box: Sandbox) -> None:
    """guard.prompt_as: deny — unknown VM, no VM and unlisted tools are denied, not asked."""
    box.write_config(guard={"timeout_s": 10, "prompt_as": "deny"})
    assert box.run_hook(POWER_OFF, {"name": "ghost-vm"}).decision == "deny"
    assert box.run_hook(POWER_OFF, {}).decision == "deny"
    assert box.run_hook("mcp__x__y", {}).decision == "deny"


def test_vm_inside_a_command_string_is_found_and_its_domain_stripped(box: Sandbox) -> None:
    """run_command: the VM comes out of an ssh command, `.lab.local` is stripped."""
    run = box.run_hook(
        "mcp__vsphere__run_command", {"command": "ssh admin@jp-ubuntu.lab.local 'sudo reboot'"}
    )
    assert run.decision == "context"
    assert box.log_records()[-1]["vms"] == ["jp-ubuntu"]


def test_several_vms_take_the_most_restrictive_decision(box: Sandbox) -> None:
    """snapshot_vms on a healthy and a paused VM: denied, and only refusals are reported."""
    run = box.run_hook("mcp__vsphere__snapshot_vms", {"vms": ["jp-ubuntu", "sql-paused-1"]})
    assert run.decision == "deny"
    assert "paused-vpg" in run.reason
    assert box.tag_requests() == 0, "no tag is requested when one VPG refuses up front"


def test_a_zvm_without_the_entity_types_lookup_still_guards(box: Sandbox) -> None:
    """GET /v1/vpgs/entitytypes answers 404 (an older ZVM): the built-in site table applies."""
    box.control(
        "POST", "/_sim/faults", {"route": "vpgs.entitytypes", "kind": "status", "status": 404}
    )
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    assert run.decision == "context"
    assert box.log_records()[-1]["site_types"] == ["vcenter"]


def test_a_vm_in_two_vpgs_gets_both_tagged(box: Sandbox) -> None:
    """multi-1 is protected twice: both VPGs get a landed tag named in the context."""
    run = box.run_hook(POWER_OFF, {"name": "multi-1"})
    assert run.decision == "context"
    record = box.log_records()[-1]
    assert sorted(record["vpgs"]) == ["multi-a", "multi-b"]
    assert len(record["checkpoint_ids"]) == 2
    assert box.tag_requests("multi-a") == box.tag_requests("multi-b") == 1


def test_a_used_checkpoint_is_not_reused_for_the_next_change(box: Sandbox) -> None:
    """Two changes in a row on one VPG: each gets its own checkpoint."""
    first = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    second = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    assert first.decision == second.decision == "context"
    ids = [r["checkpoint_ids"][0] for r in box.log_records()]
    assert ids[0] != ids[1]
    assert box.tag_requests("jp-local") == 2


def test_log_lines_are_json_and_hold_no_secrets_or_argument_values(box: Sandbox) -> None:
    """Each decision is one JSON line with the documented fields; no secret, no argument value."""
    box.run_hook(POWER_OFF, {"name": "jp-ubuntu", "admin_password": "hunter2-secret-value"})
    box.run_hook("mcp__x__y", {"token": "another-secret-arg"})
    with open(box.log_path, encoding="utf-8") as fh:
        text = fh.read()
    lines = text.splitlines()
    assert len(lines) == 2
    fields = {
        "time", "session_id", "tool_use_id", "tool", "row", "decision", "vms", "vpgs",
        "site_types", "checkpoint_ids", "tags", "requested_at", "landed_at", "elapsed_ms", "reason",
    }  # fmt: skip
    for line in lines:
        assert fields <= set(json.loads(line))
    creds = box.sim.credentials
    for secret in (
        "hunter2-secret-value",
        "another-secret-arg",
        creds["client_secret"],
        creds["password"],
    ):
        assert secret not in text


def test_concurrent_calls_on_one_vpg_share_one_tag(box: Sandbox) -> None:
    """Five hooks at once on jp-ubuntu: one tag request, all five allowed on it."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        runs = list(
            pool.map(
                lambda i: box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, tool_use_id=f"t{i}"),
                range(5),
            )
        )
    assert [r.decision for r in runs] == ["context"] * 5
    assert box.tag_requests("jp-local") == 1
    assert len({r["checkpoint_ids"][0] for r in box.log_records()}) == 1


def test_pending_then_retry_is_allowed_on_the_landed_tag(slow_aws_box: Sandbox) -> None:
    """AWS cadence past the budget: pending at once, and the retry after landing runs — one tag."""
    box = slow_aws_box
    box.wait_past_boundary("CMH-AWS-1")
    first = box.run_hook(POWER_OFF, {"name": "win2019-1"})
    assert first.decision == "deny"
    assert first.elapsed_s < 3.0, "pending must not wait out the budget"
    assert "pending" in first.reason
    assert "Retry the same call after" in first.reason
    pending = box.log_records()[-1]
    assert pending["row"] == "pending"
    assert pending["retry_after"]
    _sleep_until(pending["retry_after"])
    retry = box.run_hook(POWER_OFF, {"name": "win2019-1"})
    assert retry.decision == "context"
    landed = box.log_records()[-1]
    assert landed["tags"] == pending["tags"]
    assert box.tag_requests("CMH-AWS-1") == 1


@pytest.mark.parametrize(("mode", "expected"), [("prompt", "ask"), ("defer", "defer")])
def test_on_pending_setting(slow_aws_box: Sandbox, mode: str, expected: str) -> None:
    """guard.on_pending switches the pending answer to ask or defer."""
    slow_aws_box.write_config(guard={"timeout_s": 5, "on_pending": mode})
    slow_aws_box.wait_past_boundary("CMH-AWS-1")
    assert slow_aws_box.run_hook(POWER_OFF, {"name": "win2019-1"}).decision == expected


def test_a_tag_that_never_lands_becomes_failed_when_overdue(box: Sandbox) -> None:
    """The simulator drops the tag: pending while plausible, failed once clearly overdue."""
    box.write_config(guard={"timeout_s": 3, "overdue_factor": 1.0, "overdue_min_s": 1.0})
    box.control("POST", "/_sim/vpgs/jp-local/tag-behaviour", {"mode": "never"})
    first = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    assert first.decision == "deny"
    record = box.log_records()[-1]
    assert record["row"] == "pending", (
        "a tag still within its plausible landing is pending, not failed"
    )
    # overdue = expected + max(factor x cadence (2 s), 1 s)
    _sleep_until(record["expected_at"], extra_s=2.5)
    later = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    assert later.decision == "deny"
    assert "never reached the journal" in later.reason
    assert box.log_records()[-1]["row"] == "failed"


def test_a_vpg_paused_mid_wait_is_reported_failed_not_pending(box: Sandbox) -> None:
    """Replication paused while the hook waits for its tag: failed, with the pause as reason."""
    import threading

    box.write_config(guard={"timeout_s": 5, "landing_allowance_s": 0.5})
    box.control("POST", "/_sim/vpgs/jp-local/tag-behaviour", {"mode": "never"})
    pause = threading.Timer(
        0.8, box.control, ("POST", "/_sim/vpgs/jp-local/status", {"status": 2, "sub_status": 25})
    )
    pause.start()
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    pause.join()
    assert run.decision == "deny"
    assert "paused" in run.reason
    assert box.log_records()[-1]["row"] == "failed"


def test_deadline_holds_when_the_zvm_hangs(box: Sandbox) -> None:
    """The ZVM stops answering: the hook still denies, with a reason, before its budget."""
    box.write_config(guard={"timeout_s": 4})
    box.control("POST", "/_sim/faults", {"route": "vpgs.get", "kind": "hang"})
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"})
    assert run.decision == "deny"
    assert run.elapsed_s < 4.0 + 1.0
    assert "budget" in run.reason or "Timeout" in run.reason


def _sleep_until(iso: str, extra_s: float = 0.2) -> None:
    from datetime import datetime

    target = datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
    time.sleep(max(0.0, target - time.time()) + extra_s)


@pytest.mark.parametrize(
    "stdin",
    [b"", b"not json", b"[1, 2]", b'{"tool_input": {}}', b'{"tool_name": "x", "tool_input": "s"}'],
)
def test_malformed_stdin_exits_2_with_the_reason(box: Sandbox, stdin: bytes) -> None:
    """Unreadable or malformed stdin: exit 2 (blocks in Claude Code), reason on stderr."""
    run = box.run_hook("unused", {}, stdin=stdin)
    assert run.returncode == 2
    assert run.stdout == ""
    assert "zerto-rewind hook:" in run.stderr
    assert "blocked" in run.stderr


def test_a_missing_config_denies_every_call(box: Sandbox) -> None:
    """No config file: even a read-only call is denied, saying the config cannot be used."""
    env = box.env(ZERTO_REWIND_CONFIG=box.config_path + ".missing")
    for tool in ("mcp__vsphere__list_vms", POWER_OFF):
        run = box.run_hook(tool, {"name": "jp-ubuntu"}, env=env)
        assert run.decision == "deny"
        assert "the guard's config cannot be used" in run.reason
        assert "not found" in run.reason


def test_an_invalid_config_denies_every_call_naming_the_key(box: Sandbox) -> None:
    """A config with a bad value: every call denied, the reason names file, key and problem."""
    box.write_config(guard={"on_pending": "wait"})
    run = box.run_hook("mcp__vsphere__list_vms", {})
    assert run.decision == "deny"
    assert "guard.on_pending" in run.reason
    assert box.config_path in run.reason
    assert box.log_records()[-1]["row"] == "config_error"


def test_an_unset_secret_denies_though_a_token_is_cached(box: Sandbox) -> None:
    """A first call caches a ZVM token; with the secret's variable then unset, a mutating
    call and an unlisted one are denied as a config error naming the variable (no tag),
    and a read-only one still passes in silence."""
    assert box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}).returncode == 0
    tags = box.tag_requests()
    assert tags == 1
    env = box.env(ZERTO_REWIND_SANDBOX_SECRET="")
    run = box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, env=env)
    assert run.decision == "deny"
    assert run.output is not None
    reason = run.output["permissionDecisionReason"]
    assert "ZERTO_REWIND_SANDBOX_SECRET, which is empty or unset" in reason
    assert "zvm.client_secret_env" in reason
    assert box.tag_requests() == tags
    assert box.log_records()[-1]["row"] == "config_error"
    unlisted = box.run_hook("mcp__vsphere__mystery_tool", {"name": "jp-ubuntu"}, env=env)
    assert unlisted.decision == "deny"
    assert unlisted.output is not None
    why = unlisted.output["permissionDecisionReason"]
    assert "ZERTO_REWIND_SANDBOX_SECRET, which is empty or unset" in why
    assert box.log_records()[-1]["row"] == "config_error"
    quiet = box.run_hook("mcp__vsphere__get_vm", {"name": "jp-ubuntu"}, env=env)
    assert (quiet.returncode, quiet.stdout) == (0, "")
