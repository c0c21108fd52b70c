"""The guard's reasons, word for word, and its VM cache (guard.Guard over guard_fakes).

A reason is a promise to the agent and to the person reading the prompt: what happened,
what was (not) done, what to do. test_guard.py pins the rows; this pins the texts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from unit.core.guard_fakes import TOOL, URL, Rig, decide, rig_with
from zerto_rewind.core.decision import Outcome, Row, ToolCall, fmt_time
from zerto_rewind.core.guard import no_vm_decision

HOST = "mcp__vsphere__reconfigure_host"


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=20.0)


# ---------------------------------------------------------------- rows without a tag


@pytest.mark.parametrize(
    ("rule", "outcome"),
    [("prompt", Outcome.PROMPT), ("deny", Outcome.DENY), ("allow", Outcome.NONE)],
)
def test_unlisted_reason_names_the_rule_and_where_it_was_set(
    tmp_path: Path, rule: str, outcome: str
) -> None:
    rig = rig_with(tmp_path, {}, unknown_tools=rule)
    decision = decide(rig, "mcp__other__thing", {})
    assert (decision.row, decision.outcome, decision.tool_name) == (
        Row.UNLISTED,
        outcome,
        "mcp__other__thing",
    )
    assert decision.reason == (
        "mcp__other__thing is not in the zerto-rewind catalog (neither read_only_tools nor "
        f"tools), so no checkpoint was made (unlisted tools: {rule}, set by "
        f"{rig.settings.catalog.unknown_source}). An operator can add this tool to the guard's "
        "catalog to have it checkpointed."
    )
    assert rig.settings.catalog.unknown_source != "default"


def test_no_vm_prompt_says_what_could_not_be_told(rig: Rig) -> None:
    decision = decide(rig, TOOL, {"force": True})
    assert (decision.row, decision.outcome) == (Row.NO_VM, Outcome.PROMPT)
    assert decision.reason == (
        f"zerto-rewind cannot tell which VM {TOOL} changes (no VM name found in the arguments "
        "at name, names[]); no checkpoint was made. Approve only if you accept a change with no "
        "rewind point; an operator can check where the guard's catalog looks for this tool's VM."
    )


def test_no_vm_policies_deny_and_allow_say_so(tmp_path: Path) -> None:
    rig = rig_with(
        tmp_path,
        {
            "mcp__v__deny_me": {"vm_arg": "name", "decision": "deny"},
            "mcp__v__create": {"decision": "allow"},
            "mcp__v__host_op": {"decision": "deny"},
        },
    )
    denied = decide(rig, "mcp__v__deny_me", {})
    assert (denied.row, denied.outcome) == (Row.NO_VM, Outcome.DENY)
    assert denied.reason == (
        "zerto-rewind denied mcp__v__deny_me: it cannot tell which VM the call changes (no VM "
        "name found in the arguments at name), so no rewind point can be made, and the "
        "catalog's policy for this tool is to deny such calls. The call was not run; an operator "
        "can check where the guard's catalog looks for this tool's VM."
    )
    host = decide(rig, "mcp__v__host_op", {})
    assert host.reason.endswith(
        "The call was not run; an operator can configure which VPGs it affects or a per-tool "
        "policy."
    )
    allowed = decide(rig, "mcp__v__create", {"name": "new-vm"})
    assert (allowed.row, allowed.outcome) == (Row.NO_VM, Outcome.NONE)
    assert allowed.reason == (
        "zerto-rewind allowed mcp__v__create without a checkpoint: the catalog entry "
        "'mcp__v__create' says it changes no existing VM (decision: allow)."
    )


def test_no_vm_decision_without_a_spec_prompts(rig: Rig) -> None:
    """An unlisted-looking verdict with no spec: the default policy, prompt."""
    from zerto_rewind.core.catalog import classify

    verdict = classify("mcp__other__thing", {}, rig.settings.catalog)
    answer = no_vm_decision(ToolCall("mcp__other__thing", {}), verdict)
    assert (answer.row, answer.outcome) == (Row.NO_VM, Outcome.PROMPT)
    assert "an operator can check where the guard's catalog looks" in answer.reason


def test_vm_unknown_names_the_vm_and_the_zvm(rig: Rig) -> None:
    decision = decide(rig, TOOL, {"names": ["jp-ubuntu", "ghost"]})
    assert (decision.row, decision.outcome, decision.vms) == (
        Row.VM_UNKNOWN,
        Outcome.PROMPT,
        ("jp-ubuntu", "ghost"),
    )
    assert decision.reason == (
        f"zerto-rewind: no VPG protects ghost (the ZVM at {URL} does not know it; names match "
        f"exactly, case and spaces included), so there is nothing to rewind {TOOL} to. Approve "
        "only if the change needs no rewind point. If the VM name is wrong, an operator can "
        "check how the guard's catalog reads it from this tool's arguments."
    )


def test_vm_unknown_from_a_pattern_names_the_pattern(tmp_path: Path) -> None:
    rig = rig_with(
        tmp_path, {"mcp__ssh__exec": {"vm_arg": {"path": "command", "pattern": r"ssh (?P<vm>\S+)"}}}
    )
    decision = decide(rig, "mcp__ssh__exec", {"command": "ssh ghost-2 uptime"})
    assert decision.row == Row.VM_UNKNOWN
    assert decision.reason.startswith("zerto-rewind: no VPG protects ghost-2 (from ")
    assert "pattern" in decision.reason.split(" (the ZVM")[0]


def test_a_catalog_vpg_the_zvm_does_not_know_is_denied(tmp_path: Path) -> None:
    from zerto_rewind.errors import NotFound

    rig = rig_with(tmp_path, {HOST: {"vpgs": ["no-such-vpg"]}})

    def not_found(name: str, **_kwargs: object) -> None:
        raise NotFound(f"VPG {name!r} not found", method="GET", url="/v1/vpgs", status=404)

    rig.zvm.find_vpg = not_found  # type: ignore[method-assign]
    decision = decide(rig, HOST, {})
    assert (decision.row, decision.outcome) == (Row.FAILED, Outcome.DENY)
    assert (decision.tool_name, decision.vms) == (HOST, ())
    assert decision.reason == (
        f"zerto-rewind denied {HOST}: the guard's catalog says it changes VPG 'no-such-vpg', "
        f"which the ZVM at {URL} does not know, so no rewind point could be made and the call "
        "was not run."
    )
    assert rig.zvm.tag_requests("jp-local") == 0


def test_a_catalog_vpg_is_tagged_and_named_in_a_failure(tmp_path: Path) -> None:
    """A host-level tool tags the VPGs the catalog names; a refusal says "named by the
    catalog" where the VMs would be."""
    rig = rig_with(
        tmp_path, {HOST: {"vpgs": ["jp-local"]}, "mcp__v__paused": {"vpgs": ["paused-vpg"]}}
    )
    ok = decide(rig, HOST, {})
    assert (ok.row, rig.zvm.tag_requests("jp-local")) == (Row.CONFIRMED, 1)
    refused = decide(rig, "mcp__v__paused", {})
    assert refused.row == Row.FAILED
    assert "VPG 'paused-vpg' (named by the catalog): VPG 'paused-vpg' cannot take" in refused.reason


# ---------------------------------------------------------------- failed, pending, error


def test_failed_reason_names_each_vpg_and_its_vms(rig: Rig) -> None:
    decision = decide(rig, TOOL, {"name": "sql-paused-1"})
    assert decision.reason == (
        f"zerto-rewind denied {TOOL}: no rewind point could be made, so the call was not run. "
        "VPG 'paused-vpg' (sql-paused-1): VPG 'paused-vpg' cannot take a checkpoint: replication "
        "is paused (SubStatus 25 ReplicationPausedUserInitiated); resume replication in the "
        "Zerto UI, then retry"
    )


def test_pending_reason_names_tag_vpg_site_cadence_expected_budget_and_retry(rig: Rig) -> None:
    decision = decide(rig, TOOL, {"name": "win2019-1"})
    (vpg,) = decision.vpgs
    expected = vpg.expected_at or 0.0
    assert decision.retry_after == pytest.approx(expected + 1.0, abs=1e-3)
    assert decision.reason == (
        f"zerto-rewind: checkpoint pending for {TOOL}, so the call was not run yet. tag "
        f"{vpg.tag!r} was requested at {fmt_time(rig.clock.wall())} on VPG 'CMH-AWS-1' "
        "(aws-protected, journal cadence ~630 s (observed)) and is expected in the journal by "
        f"{fmt_time(expected)}. That is beyond this guard's 20 s budget. Retry the same call "
        f"after {fmt_time(expected + 1.0)}: the retry finds the landed checkpoint and is allowed "
        "without a new tag."
    )


@pytest.mark.parametrize(
    ("on_pending", "outcome"), [("prompt", Outcome.PROMPT), ("defer", Outcome.DEFER)]
)
def test_pending_follows_on_pending(tmp_path: Path, on_pending: str, outcome: str) -> None:
    rig = Rig(tmp_path, timeout_s=20.0, on_pending=on_pending)
    assert rig.decide("win2019-1").outcome == outcome


def test_a_pending_retry_is_never_sooner_than_two_seconds(tmp_path: Path) -> None:
    """A tag expected (nearly) now but past the deadline: retry_after is at least now + 2 s."""
    rig = Rig(tmp_path, timeout_s=20.0)
    rig.zvm.tag_behaviour("jp-local", "never")
    start = rig.clock.mono()
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=start + 8.0)
    assert decision.row == Row.PENDING
    (vpg,) = decision.vpgs
    assert (vpg.expected_at or 0) + 1.0 < rig.clock.wall() + 2.0
    assert decision.retry_after == pytest.approx(rig.clock.wall() + 2.0, abs=1e-3)


@pytest.mark.parametrize("vms", [("jp-ubuntu",), ()])
def test_a_zvm_error_reason_says_what_failed_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vms: tuple[str, ...]
) -> None:
    """A ZVM error: deny, naming the error and the VMs (none for a catalog-named VPG)."""
    from zerto_rewind.errors import ZvmTimeout

    def timeout(*_args: object, **_kwargs: object) -> None:
        raise ZvmTimeout("GET /v1/vms timed out")

    rig = rig_with(tmp_path, {HOST: {"vpgs": ["jp-local"]}})
    monkeypatch.setattr(rig.zvm, "find_vms", timeout)
    monkeypatch.setattr(rig.zvm, "find_vpg", timeout)
    tool = TOOL if vms else HOST
    decision = decide(rig, tool, {"name": vms[0]} if vms else {})
    target = " on jp-ubuntu" if vms else ""
    assert (decision.row, decision.outcome, decision.vms) == (Row.ERROR, Outcome.DENY, vms)
    assert decision.reason == (
        f"zerto-rewind denied {tool}{target}: no checkpoint could be confirmed because "
        "ZvmTimeout: GET /v1/vms timed out. The call was not run. An operator can look into it "
        "with `zerto-rewind doctor`; retry the same call once it is resolved."
    )


def test_a_config_error_denies_with_fix_the_config(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from zerto_rewind.core import guard as guard_module
    from zerto_rewind.errors import ConfigError

    def broken(*_args: object) -> None:
        raise ConfigError("bad glob", path="/c.json", key="tools")

    monkeypatch.setattr(guard_module, "classify", broken)
    decision = decide(rig, TOOL, {"name": "jp-ubuntu"})
    assert (decision.row, decision.outcome, decision.vms) == (Row.CONFIG_ERROR, Outcome.DENY, ())
    assert decision.reason == (
        f"zerto-rewind denied {TOOL}: the guard's config cannot be used (/c.json: tools: bad "
        "glob), so no checkpoint could be made; the call was not run. An operator can see the "
        "problem with `zerto-rewind doctor`."
    )


def test_elapsed_ms_is_the_time_the_guard_took(rig: Rig) -> None:
    """elapsed_ms is the guard's own time on its monotonic clock (here: its sleeps)."""
    decision = decide(rig, TOOL, {"name": "jp-ubuntu"})
    assert decision.elapsed_ms == int(sum(rig.clock.sleeps) * 1000)
    assert decision.elapsed_ms > 1000


# ---------------------------------------------------------------- the VM cache


def test_vm_lookups_are_cached_per_zvm_and_exact_name(rig: Rig) -> None:
    """A warm cache answers the VM → VPG lookup without asking the ZVM; a name that differs
    only by case is another VM, never answered from that cache; an unknown VM is not cached
    (it may be protected a minute later)."""
    rig.decide("jp-ubuntu")
    rig.clock.advance(30.0)
    second = rig.decide("jp-ubuntu")
    assert second.row == Row.CONFIRMED
    assert rig.zvm.calls.count("find_vms jp-ubuntu") == 1, "the second lookup came from the cache"
    twin = rig.decide("JP-Ubuntu")
    assert (twin.row, twin.outcome) == (Row.VM_UNKNOWN, Outcome.PROMPT)
    assert rig.zvm.calls.count("find_vms JP-Ubuntu") == 1
    rig.decide("ghost")
    rig.decide("ghost")
    assert rig.zvm.calls.count("find_vms ghost") == 2


def test_a_cached_lookup_lists_every_vpg_of_the_vm(rig: Rig) -> None:
    first = rig.decide("multi-1")
    rig.clock.advance(30.0)
    second = rig.decide("multi-1")
    assert rig.zvm.calls.count("find_vms multi-1") == 1
    assert sorted(v.vpg_name for v in second.vpgs) == sorted(v.vpg_name for v in first.vpgs)
    assert sorted(v.vpg_name for v in second.vpgs) == ["multi-a", "multi-b"]


def test_a_damaged_cache_entry_is_ignored(rig: Rig) -> None:
    key = f"{URL}|jp-ubuntu"
    older = [["vpg-1", "jp-local"]]  # an older release's entry: no VM identity in it
    for damaged in (["not-a-pair"], [["a", "b", "c"]], "x", [["only-one"]], older):
        rig.state.store("vms", key, damaged)
        decision = rig.decide("jp-ubuntu")
        assert decision.vpgs[0].vpg_name == "jp-local"
    assert rig.zvm.calls.count("find_vms jp-ubuntu") == 5


def test_the_cache_expires_after_its_ttl(tmp_path: Path) -> None:
    rig = Rig(tmp_path, timeout_s=20.0, vm_cache_ttl_s=0.0)
    rig.decide("jp-ubuntu")
    rig.decide("jp-ubuntu")
    assert rig.zvm.calls.count("find_vms jp-ubuntu") == 2
