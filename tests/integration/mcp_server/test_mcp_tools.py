"""The MCP tools end to end, in memory, against the simulator over real TLS sockets."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from integration.mcp_server.mcp_helpers import (
    LIST_VMS,
    POWER_OFF,
    call,
    fails,
    log_records,
    sim_post,
    snapshot,
    tag_requests,
    text,
    vpg_wire,
    write_mcp_config,
)
from zerto_rewind.mcp_server.server import build_server

pytestmark = pytest.mark.anyio

BASE_TOOLS = {
    "zerto_check_tool",
    "zerto_guard_before_mutate",
    "zerto_protection_status",
    "zerto_list_checkpoints",
    "zerto_recovery_plan",
    "zerto_rewind_plan",
    "zerto_start_failover_test",
    "zerto_stop_failover_test",
}
LIVE_TOOLS = {
    "zerto_failover",
    "zerto_failover_commit",
    "zerto_failover_rollback",
    "zerto_restore_vm",
    "zerto_restore_commit",
    "zerto_restore_rollback",
}


@asynccontextmanager
async def connect(config: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    """An in-memory client session with a server built from ``config``."""
    async with Client(build_server(env, config=str(config)), raise_exceptions=True) as client:
        yield client


def power_off(vm: str) -> dict[str, Any]:
    """The arguments of a guarded call on ``vm``."""
    return {"tool_name": POWER_OFF, "tool_input": {"name": vm}}


async def latest_checkpoint(client: Client, vm: str, vpg: str | None = None) -> str:
    """The newest checkpoint id of the VM's (only, or named) VPG."""
    listing = await call(client, "zerto_list_checkpoints", vm=vm, since="1m", vpg=vpg)
    return str(listing["vpgs"][0]["checkpoints"][0]["checkpoint_id"])


# ---------------------------------------------------------------- listing


async def test_tools_are_typed_and_annotated_truthfully(config, env):
    """tools/list shows the base tools with output schemas and honest annotations, no live ones."""
    async with connect(config, env) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == BASE_TOOLS
    for tool in tools.values():
        assert tool.output_schema is not None
        assert tool.description
        assert tool.annotations is not None
        assert tool.annotations.open_world_hint is False
    for name in ("zerto_check_tool", "zerto_protection_status", "zerto_recovery_plan"):
        assert tools[name].annotations.read_only_hint is True
    guard = tools["zerto_guard_before_mutate"].annotations
    assert (guard.read_only_hint, guard.destructive_hint, guard.idempotent_hint) == (
        False,
        False,
        True,
    )
    assert tools["zerto_stop_failover_test"].annotations.destructive_hint is True
    assert "tool_input" in tools["zerto_check_tool"].input_schema["properties"]


async def test_live_tools_are_listed_only_when_allowed(sim, tmp_path, env):
    """With recovery.allow_live the live tools appear, marked destructive, confirm documented."""
    config = write_mcp_config(sim, tmp_path, allow_live=True)
    async with connect(config, env) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == BASE_TOOLS | LIVE_TOOLS
    for name in LIVE_TOOLS:
        assert tools[name].annotations.destructive_hint is True
        assert tools[name].annotations.read_only_hint is False
        confirm = tools[name].input_schema["properties"]["confirm"]
        assert "<vm>@<checkpoint" in confirm["description"]


# ---------------------------------------------------------------- check and guard


async def test_check_tool_has_no_side_effects(sim, config, env, tmp_path):
    """zerto_check_tool predicts confirmed/pending/failed without a tag, a state write or a log."""
    async with connect(config, env) as client:
        await call(client, "zerto_protection_status", vm="jp-ubuntu")  # token cached, dirs made
        before = snapshot(tmp_path / "state")
        vc = await call(client, "zerto_check_tool", **power_off("jp-ubuntu"))
        aws = await call(client, "zerto_check_tool", **power_off("win2019-1"))
        paused = await call(client, "zerto_check_tool", **power_off("sql-paused-1"))
        assert snapshot(tmp_path / "state") == before
    assert tag_requests(sim) == {}
    assert not (tmp_path / "decisions.log").exists()
    assert (vc["row"], vc["outcome"], vc["would_request_tag"]) == ("confirmed", "context", True)
    assert vc["vpgs"][0]["site_kind"] == "vcenter"
    assert vc["expected_wait_s"] <= 2.0
    assert (aws["row"], aws["exceeds_budget"]) == ("pending", True)
    assert aws["vpgs"][0]["site_kind"] == "aws"
    assert aws["vpgs"][0]["cadence_s"] == 8.0
    assert paused["row"] == "failed"
    assert "paused" in paused["vpgs"][0]["refusal"]


async def test_check_tool_classifies_without_the_zvm(config, env):
    """Read-only and unlisted tools are answered from the catalog alone."""
    async with connect(config, env) as client:
        read_only = await call(client, "zerto_check_tool", tool_name=LIST_VMS, tool_input={})
        unlisted = await call(client, "zerto_check_tool", tool_name="Bash", tool_input={})
        no_vm = await call(client, "zerto_check_tool", tool_name=POWER_OFF, tool_input={})
    assert (read_only["row"], read_only["outcome"]) == ("read_only", "none")
    assert (unlisted["row"], unlisted["outcome"]) == ("unlisted", "prompt")
    assert no_vm["row"] == "no_vm"


async def test_guard_confirms_logs_and_is_reused(sim, config, env, tmp_path):
    """jp-ubuntu: a landed checkpoint, logged as origin mcp; asking again does not tag again."""
    async with connect(config, env) as client:
        first = await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        again = await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        check = await call(client, "zerto_check_tool", **power_off("jp-ubuntu"))
    assert (first["row"], first["proceed"]) == ("confirmed", True)
    cp = first["checkpoints"][0]
    assert cp["vpg"] == "jp-local"
    assert cp["checkpoint_id"]
    assert cp["tag"]
    assert cp["timestamp"]
    assert "zerto_recovery_plan" in cp["rewind"]
    assert again["checkpoints"][0]["checkpoint_id"] == cp["checkpoint_id"]
    assert again["checkpoints"][0]["new_tag"] is False
    assert tag_requests(sim) == {"jp-local": 1}
    assert check["vpgs"][0]["action"] == "reuse_landed"
    assert check["expected_wait_s"] == 0
    records = log_records(tmp_path / "decisions.log")
    assert [(r["origin"], r["row"]) for r in records] == [("mcp", "confirmed")] * 2
    assert records[0]["checkpoint_ids"] == [cp["checkpoint_id"]]


async def test_guard_fails_fast_on_a_paused_vpg(sim, config, env):
    """sql-paused-1: failed in well under a second, with the paused reason and no tag."""
    async with connect(config, env) as client:
        started = time.monotonic()
        answer = await call(client, "zerto_guard_before_mutate", **power_off("sql-paused-1"))
        elapsed = time.monotonic() - started
    assert (answer["row"], answer["outcome"], answer["proceed"]) == ("failed", "deny", False)
    assert "replication is paused" in answer["checkpoints"][0]["reason"]
    assert "paused" in answer["message"]
    assert elapsed < 2.0
    assert tag_requests(sim) == {}


async def test_guard_pending_then_confirmed_without_a_second_tag(sim, config, env, tmp_path):
    """win2019-1 (aws): pending with a retry time; after it, confirmed on the same single tag."""
    async with connect(config, env) as client:
        pending = await call(client, "zerto_guard_before_mutate", **power_off("win2019-1"))
        assert (pending["row"], pending["proceed"]) == ("pending", False)
        assert pending["retry_after"]
        assert 0 < pending["retry_in_s"] < 12
        assert pending["checkpoints"][0]["expected_at"]
        assert pending["checkpoints"][0]["tag"]
        await anyio.sleep(pending["retry_in_s"] + 0.2)
        landed = await call(client, "zerto_guard_before_mutate", **power_off("win2019-1"))
    assert landed["row"] == "confirmed"
    assert landed["checkpoints"][0]["tag"] == pending["checkpoints"][0]["tag"]
    assert tag_requests(sim) == {"CMH-AWS-1": 1}
    rows = [r["row"] for r in log_records(tmp_path / "decisions.log")]
    assert rows == ["pending", "confirmed"]


# ---------------------------------------------------------------- status and checkpoints


async def test_protection_status_lists_every_vpg(config, env):
    """Status names the VPGs, site types, health, cadence and the guard's own tag."""
    async with connect(config, env) as client:
        await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        jp = await call(client, "zerto_protection_status", vm="jp-ubuntu")
        multi = await call(client, "zerto_protection_status", vm="multi-1")
        paused = await call(client, "zerto_protection_status", vm="sql-paused-1")
        aws = await call(client, "zerto_protection_status", vm="win2019-1")
        unknown = await fails(client, "zerto_protection_status", vm="no-such-vm")
    vpg = jp["vpgs"][0]
    assert (vpg["vpg"], vpg["site_kind"], vpg["status"], vpg["can_tag"]) == (
        "jp-local",
        "vcenter",
        "MeetingSLA",
        True,
    )
    assert vpg["cadence_source"] == "observed"
    assert vpg["cadence_s"] == pytest.approx(1.0)
    assert vpg["latest_checkpoint"]
    assert vpg["guard_tag"]["state"] == "landed"
    assert [v["vpg"] for v in multi["vpgs"]] == ["multi-a", "multi-b"]
    assert paused["vpgs"][0]["can_tag"] is False
    assert paused["vpgs"][0]["sub_status"] == "ReplicationPausedUserInitiated"
    assert (aws["vpgs"][0]["site_kind"], aws["vpgs"][0]["cadence_source"]) == ("aws", "config")
    assert "no VPG protects a VM named 'no-such-vm'" in unknown


async def test_list_checkpoints_since_and_tagged_only(config, env):
    """Listing filters by a relative or ISO since, and to tagged checkpoints."""
    async with connect(config, env) as client:
        answer = await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        tagged = await call(client, "zerto_list_checkpoints", vm="jp-ubuntu", tagged_only=True)
        recent = await call(client, "zerto_list_checkpoints", vm="jp-ubuntu", since="5s")
        future = await call(
            client, "zerto_list_checkpoints", vm="jp-ubuntu", since="2999-01-01T00:00:00Z"
        )
        limited = await call(client, "zerto_list_checkpoints", vm="jp-ubuntu", limit=2)
        bad = await fails(client, "zerto_list_checkpoints", vm="jp-ubuntu", since="yesterday")
    (group,) = tagged["vpgs"]
    assert [c["checkpoint_id"] for c in group["checkpoints"]] == [
        answer["checkpoints"][0]["checkpoint_id"]
    ]
    assert group["checkpoints"][0]["tag"].startswith("zerto-rewind ")
    assert 3 <= recent["vpgs"][0]["total"] <= 8  # a 1 s cadence, plus the tag
    stamps = [c["timestamp"] for c in recent["vpgs"][0]["checkpoints"]]
    assert stamps == sorted(stamps, reverse=True)
    assert future["vpgs"][0]["total"] == 0
    assert len(limited["vpgs"][0]["checkpoints"]) == 2
    assert limited["vpgs"][0]["truncated"]
    assert "since='yesterday'" in bad


# ---------------------------------------------------------------- recovery


async def test_recovery_plan_explains_the_ways_back(config, env):
    """The plan validates the checkpoint and lists test, failover and restore with their effects."""
    async with connect(config, env) as client:
        answer = await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        checkpoint = answer["checkpoints"][0]["checkpoint_id"]
        plan = await call(client, "zerto_recovery_plan", vm="jp-ubuntu", checkpoint=checkpoint)
    assert plan["checkpoint"]["checkpoint_id"] == checkpoint
    assert plan["checkpoint"]["tag"]
    assert plan["confirm"] == f"jp-ubuntu@{checkpoint}"
    assert "never rolls the production VM back in place" in plan["in_place_rewind"]
    options = {o["operation"]: o for o in plan["options"]}
    assert set(options) == {"failover_test", "live_failover", "journal_vm_restore"}
    assert options["failover_test"]["available"]
    assert not options["failover_test"]["disruptive"]
    assert "test VMs" in options["failover_test"]["affects"]
    assert options["live_failover"]["disruptive"]
    assert "downtime" in options["live_failover"]["affects"]
    assert not options["live_failover"]["available"]
    assert "allow_live" in options["live_failover"]["unavailable_reason"]
    first = options["failover_test"]["steps"][0]
    assert first["tool"] == "zerto_start_failover_test"
    assert first["arguments"] == {"vm": "jp-ubuntu", "checkpoint": checkpoint}
    failover = options["live_failover"]["steps"][0]["arguments"]
    assert failover["confirm"] == plan["confirm"]
    assert any(s["cli"] == "zerto-rewind status jp-ubuntu" for s in plan["inspect"])


async def test_recovery_plan_refuses_unknown_checkpoints_and_ambiguous_vms(config, env):
    """A checkpoint not in the journal names the nearest tags; a multi-VPG VM needs vpg."""
    async with connect(config, env) as client:
        answer = await call(client, "zerto_guard_before_mutate", **power_off("jp-ubuntu"))
        missing = await fails(client, "zerto_recovery_plan", vm="jp-ubuntu", checkpoint="42")
        checkpoint = await latest_checkpoint(client, "multi-1", vpg="multi-b")
        ambiguous = await fails(client, "zerto_recovery_plan", vm="multi-1", checkpoint=checkpoint)
        plan = await call(
            client, "zerto_recovery_plan", vm="multi-1", checkpoint=checkpoint, vpg="multi-b"
        )
    assert "checkpoint '42' is not in the journal of VPG 'jp-local'" in missing
    assert answer["checkpoints"][0]["checkpoint_id"] in missing
    assert "multi-a" in ambiguous
    assert "multi-b" in ambiguous
    assert "vpg=" in ambiguous
    assert plan["vpg"] == "multi-b"
    assert plan["recovery_site"] == "hv-dr"
    assert plan["options"][0]["steps"][0]["arguments"]["vpg"] == "multi-b"


async def test_failover_test_start_and_stop_drive_the_vpg(sim, config, env):
    """Starting a test shows it running in the ZVM; stopping it ends it and records the result."""
    async with connect(config, env) as client:
        checkpoint = await latest_checkpoint(client, "jp-ubuntu")
        started = await call(
            client, "zerto_start_failover_test", vm="jp-ubuntu", checkpoint=checkpoint
        )
        running = vpg_wire(sim, "jp-local")
        again = await fails(
            client, "zerto_start_failover_test", vm="jp-ubuntu", checkpoint=checkpoint
        )
        stopped = await call(
            client, "zerto_stop_failover_test", vm="jp-ubuntu", success=True, summary="boots"
        )
    assert (started["task_state"], started["failover_test_running"]) == ("COMPLETED", True)
    assert started["checkpoint"]["checkpoint_id"] == checkpoint
    assert started["task_id"]
    assert started["next_steps"][0]["tool"] == "zerto_stop_failover_test"
    assert running["ActiveProcessesApi"]["RunningFailOverTestApi"] is not None
    assert "failover test in progress" in again
    assert (stopped["task_state"], stopped["failover_test_running"]) == ("COMPLETED", False)
    after = vpg_wire(sim, "jp-local")
    assert after["ActiveProcessesApi"]["RunningFailOverTestApi"] is None
    assert after["LastTest"]


async def test_live_failover_needs_the_exact_confirm(sim, tmp_path, env):
    """Live failover refuses a wrong confirm (nothing changes), runs with it, then rolls back."""
    config = write_mcp_config(sim, tmp_path, allow_live=True)
    async with connect(config, env) as client:
        cp = await latest_checkpoint(client, "jp-ubuntu")
        wrong = await fails(
            client, "zerto_failover", vm="jp-ubuntu", checkpoint=cp, confirm="jp-ubuntu"
        )
        untouched = vpg_wire(sim, "jp-local")["SubStatus"]
        started = await call(
            client, "zerto_failover", vm="jp-ubuntu", checkpoint=cp, confirm=f"jp-ubuntu@{cp}"
        )
        waiting = vpg_wire(sim, "jp-local")["SubStatus"]
        bad_rollback = await fails(
            client, "zerto_failover_rollback", vm="jp-ubuntu", confirm="jp-ubuntu@1"
        )
        rolled = await call(
            client, "zerto_failover_rollback", vm="jp-ubuntu", confirm=f"jp-ubuntu@{cp}"
        )
    assert f"'jp-ubuntu@{cp}'" in wrong
    assert "Nothing was changed" in wrong
    assert untouched == 0
    assert waiting == 15
    assert started["vpg_sub_status"] == "FailingOverBeforeCommit"
    assert [s["tool"] for s in started["next_steps"]] == [
        "zerto_failover_commit",
        "zerto_failover_rollback",
    ]
    assert "confirm must repeat" in bad_rollback
    assert (rolled["vpg_status"], rolled["vpg_sub_status"]) == ("MeetingSLA", "None")


async def test_journal_restore_and_failover_commit(sim, tmp_path, env):
    """A journal VM restore commits with the confirm; a failover commits with reverse protection."""
    config = write_mcp_config(sim, tmp_path, allow_live=True)
    async with connect(config, env) as client:
        cp = await latest_checkpoint(client, "jp-ubuntu")
        token = f"jp-ubuntu@{cp}"
        restored = await call(
            client, "zerto_restore_vm", vm="jp-ubuntu", checkpoint=cp, confirm=token,
            restored_vm_name="jp-ubuntu-back",
        )  # fmt: skip
        committed = await call(client, "zerto_restore_commit", vm="jp-ubuntu", confirm=token)
        await call(client, "zerto_failover", vm="jp-ubuntu", checkpoint=cp, confirm=token)
        final = await call(
            client, "zerto_failover_commit", vm="jp-ubuntu", confirm=token, reverse_protection=True
        )
    assert restored["vpg_sub_status"] == "FailingOverBeforeCommit"
    assert committed["vpg_sub_status"] == "None"
    assert (final["vpg_status"], final["task_state"]) == ("MeetingSLA", "COMPLETED")
    assert vpg_wire(sim, "jp-local")["ProtectedSiteName"] == "zvm-dr"  # reversed


async def test_calling_an_unregistered_live_tool_is_an_error(config, env):
    """With allow_live false the live tools are absent, so calling one is an unknown-tool error."""
    async with connect(config, env) as client:
        result = await client.call_tool("zerto_failover", {"vm": "jp-ubuntu"})
    assert result.is_error
    assert "zerto_failover" in text(result)


# ---------------------------------------------------------------- errors


async def test_errors_are_readable_when_the_zvm_fails(sim, config, env, tmp_path):
    """A ZVM fault or outage comes back as a tool error saying what failed and what to do."""
    async with connect(config, env) as client:
        await call(client, "zerto_protection_status", vm="jp-ubuntu")
        sim_post(sim, "/_sim/faults", {"route": "vms.list", "kind": "status", "status": 500})
        faulted = await fails(client, "zerto_protection_status", vm="jp-ubuntu")
        sim.stop()
        down = await fails(client, "zerto_list_checkpoints", vm="jp-ubuntu")
        guard = await fails(client, "zerto_guard_before_mutate", **power_off("web-az-1"))
    assert "ApiError" in faulted
    assert "500" in faulted
    assert "ZvmConnectionError" in down
    assert "zerto-rewind doctor" in down
    assert "no checkpoint could be confirmed" in guard
    assert log_records(tmp_path / "decisions.log")[-1]["row"] == "error"


async def test_errors_are_readable_when_the_config_is_broken(sim, tmp_path, env):
    """A broken config still lists tools; calls say 'fix the config' until it is fixed."""
    config = tmp_path / "config.json"
    config.write_text("{not json")
    async with connect(config, env) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        broken = await fails(client, "zerto_protection_status", vm="jp-ubuntu")
        config.unlink()  # start again from no file, as a user fixing it might
        write_mcp_config(sim, tmp_path)
        fixed = await call(client, "zerto_protection_status", vm="jp-ubuntu")
    assert names == BASE_TOOLS
    assert broken.startswith("Error executing tool zerto_protection_status: fix the config:")
    assert "not valid JSON" in broken
    assert fixed["vpgs"][0]["vpg"] == "jp-local"
