"""`zerto-rewind serve` over stdio, with the real MCP client, against the three-sites
simulator process (hq, dr, azure and aws, one ZVM each, over TLS): every tool finds the
VM across the sites, says which site's ZVM it used, and names a dark site.

three-sites: hq-web-dr (web-01, app-01) hq -> dr; hq-app-azure (app-01, crm-01) hq -> azure;
dr-reports-aws (reports-01, dr-db-01) dr -> aws; dr-sql-paused (sql-dr-01) dr -> hq.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from integration.mcp_server.mcp_helpers import LIST_VMS, POWER_OFF, call, fails, serve
from support.config import write_ready_estate_config
from support.sim import estate_sim_fixture, set_site_fault

pytestmark = pytest.mark.anyio

GUARD = {"timeout_s": 20, "site_cadence_s": {"vcenter": 1.0}, "landing_allowance_s": 0.5}


# One simulator process for the module, journals every second.
ready = estate_sim_fixture(
    "--cadence", "vcenter=1", "--jitter", "0", "--tag-lag", "0.3", "--task-duration", "0.2",
    "--seed", "7",
)  # fmt: skip


def estate_config(ready: dict[str, Any], directory: Path, **recovery: Any) -> Path:
    """Every site in ``zvms``; state and log of its own in ``directory``."""
    return write_ready_estate_config(
        ready,
        directory,
        read_only_tools=[LIST_VMS],
        tools={POWER_OFF: {"vm_arg": "name"}},
        guard=GUARD,
        recovery=recovery,
        log=str(directory / "decisions.log"),
    )


def child_env(directory: Path) -> dict[str, str]:
    return {"HOME": str(directory)}


async def test_reads_and_the_guard_name_the_site_whose_zvm_was_used(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = estate_config(ready, tmp_path)
    async with serve(config, child_env(tmp_path), tmp_path / "serve.err") as client:
        status = await call(client, "zerto_protection_status", vm="app-01")
        assert [(v["vpg"], v["zvm_site"]) for v in status["vpgs"]] == [
            ("hq-app-azure", "hq"),
            ("hq-web-dr", "hq"),
        ]
        assert {v["zvm_url"] for v in status["vpgs"]} == {ready["sites"]["hq"]["url"]}
        assert status["notes"] == []
        listing = await call(client, "zerto_list_checkpoints", vm="reports-01", since="10m")
        assert [(g["vpg"], g["zvm_site"]) for g in listing["vpgs"]] == [("dr-reports-aws", "dr")]
        assert listing["vpgs"][0]["total"] > 0
        check = await call(
            client, "zerto_check_tool", tool_name=POWER_OFF, tool_input={"name": "reports-01"}
        )
        assert [(v["vpg"], v["zvm_site"]) for v in check["vpgs"]] == [("dr-reports-aws", "dr")]
        answer = await call(
            client,
            "zerto_guard_before_mutate",
            tool_name=POWER_OFF,
            tool_input={"name": "reports-01"},
        )
        assert answer["row"] == "confirmed", answer["message"]
        (confirmed,) = answer["checkpoints"]
        assert (confirmed["vpg"], confirmed["zvm_site"]) == ("dr-reports-aws", "dr")


async def test_a_failover_test_runs_on_the_recovery_sites_zvm_and_says_so(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = estate_config(ready, tmp_path)
    async with serve(config, child_env(tmp_path), tmp_path / "serve.err") as client:
        listing = await call(client, "zerto_list_checkpoints", vm="web-01", since="10m")
        checkpoint = listing["vpgs"][0]["checkpoints"][0]["checkpoint_id"]
        plan = await call(client, "zerto_recovery_plan", vm="web-01", checkpoint=checkpoint)
        assert plan["zvm_site"] == "hq"
        assert plan["operations_zvm"].startswith(
            f"the ZVM of site dr ({ready['sites']['dr']['url']})"
        )
        assert "recovery.via: recovery" in plan["operations_zvm"]
        started = await call(
            client, "zerto_start_failover_test", vm="web-01", checkpoint=checkpoint
        )
        assert (started["zvm_site"], started["zvm_url"]) == ("dr", ready["sites"]["dr"]["url"])
        assert "the ZVM of site dr" in started["summary"]
        assert started["failover_test_running"] is True
        stopped = await call(
            client, "zerto_stop_failover_test", vm="web-01", success=True, summary="ok"
        )
        assert stopped["zvm_site"] == "dr"
        assert stopped["failover_test_running"] is False


async def test_recovery_via_protected_runs_on_the_protected_sites_zvm(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = estate_config(ready, tmp_path, via="protected")
    async with serve(config, child_env(tmp_path), tmp_path / "serve.err") as client:
        listing = await call(client, "zerto_list_checkpoints", vm="crm-01", since="10m")
        checkpoint = listing["vpgs"][0]["checkpoints"][0]["checkpoint_id"]
        started = await call(
            client, "zerto_start_failover_test", vm="crm-01", checkpoint=checkpoint
        )
        assert started["zvm_site"] == "hq"
        stopped = await call(
            client, "zerto_stop_failover_test", vm="crm-01", success=True, summary="ok"
        )
        assert stopped["zvm_site"] == "hq"


async def test_a_dark_site_is_named_never_not_protected(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = estate_config(ready, tmp_path)
    set_site_fault(ready, "dr", {"kind": "down"})
    try:
        async with serve(config, child_env(tmp_path), tmp_path / "serve.err") as client:
            unknown = await fails(client, "zerto_protection_status", vm="nowhere-01")
            assert "site dr" in unknown
            assert "did not answer" in unknown
            assert "no VPG protects" not in unknown
            # reports-01 is protected at dr (dark); aws, its recovery site, still shows it
            status = await call(client, "zerto_protection_status", vm="reports-01")
            assert [(v["vpg"], v["zvm_site"]) for v in status["vpgs"]] == [
                ("dr-reports-aws", "aws")
            ]
            assert any("site dr did not answer" in n for n in status["notes"])
            # web-01 recovers to dr: its failover test has no ZVM to run on
            listing = await call(client, "zerto_list_checkpoints", vm="web-01", since="10m")
            checkpoint = listing["vpgs"][0]["checkpoints"][0]["checkpoint_id"]
            refused = await fails(
                client, "zerto_start_failover_test", vm="web-01", checkpoint=checkpoint
            )
            assert "site dr" in refused
            assert "did not answer" in refused
            # the guard denies a call on a VM of the dark site, naming it
            check = await call(
                client, "zerto_check_tool", tool_name=POWER_OFF, tool_input={"name": "sql-dr-01"}
            )
            assert check["outcome"] == "deny"
            assert "site dr" in check["summary"]
    finally:
        set_site_fault(ready, "dr", None)


async def test_a_live_failover_is_finished_only_through_the_site_that_started_it(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    """reports-01 (dr -> aws): failed over through aws; a rollback that would go through dr
    (recovery.via changed) is refused, doing nothing; through aws it rolls back."""
    config = estate_config(ready, tmp_path, allow_live=True)
    async with serve(config, child_env(tmp_path), tmp_path / "serve.err") as client:
        listing = await call(client, "zerto_list_checkpoints", vm="reports-01", since="10m")
        checkpoint = listing["vpgs"][0]["checkpoints"][0]["checkpoint_id"]
        token = f"reports-01@{checkpoint}"
        started = await call(
            client, "zerto_failover", vm="reports-01", checkpoint=checkpoint, confirm=token
        )
        assert (started["zvm_site"], started["operation"]) == ("aws", "failover")
    moved = write_ready_estate_config(
        ready,
        tmp_path,
        name="protected.json",
        read_only_tools=[LIST_VMS],
        guard=GUARD,
        recovery={"allow_live": True, "via": "protected"},
    )
    async with serve(moved, child_env(tmp_path), tmp_path / "moved.err") as client:
        refused = await fails(client, "zerto_failover_rollback", vm="reports-01", confirm=token)
        assert "started through the ZVM of site aws" in refused
        assert "nothing was done" in refused
    async with serve(config, child_env(tmp_path), tmp_path / "serve2.err") as client:
        rolled = await call(client, "zerto_failover_rollback", vm="reports-01", confirm=token)
        assert (rolled["zvm_site"], rolled["operation"]) == ("aws", "failover_rollback")
