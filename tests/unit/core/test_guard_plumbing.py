"""The guard's plumbing (guard.Guard over guard_fakes): every ZVM request carries the
deadline, the entity-type cache, the late re-check of several VPGs, the lazily opened
client and state, and the fields of the decision itself."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from unit.core.guard_fakes import TOOL, URL, Rig, make_settings
from zerto_rewind.core import tagging
from zerto_rewind.core.decision import Outcome, Row, ToolCall, VpgOutcome
from zerto_rewind.core.guard import Guard, budget_deadline, entity_type_names
from zerto_rewind.core.state import GuardState

WITH_DEADLINE = (
    "find_vms",
    "find_vpg",
    "get_vpg",
    "entity_types",
    "list_checkpoints",
    "tag_checkpoint",
    "get_task",
)


@pytest.fixture
def rig(tmp_path: Path) -> Rig:
    return Rig(tmp_path, timeout_s=20.0)


def record_deadlines(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Wrap the fake ZVM's methods: record (method, deadline) of every request."""
    seen: list[tuple[str, Any]] = []
    for name in WITH_DEADLINE:
        original = getattr(rig.zvm, name)

        def wrapped(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            seen.append((_name, kwargs.get("deadline", "missing")))
            return _original(*args, **kwargs)

        monkeypatch.setattr(rig.zvm, name, wrapped)
    return seen


# ---------------------------------------------------------------- deadlines


def test_every_zvm_request_carries_the_guards_deadline(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tag requested, its task asked, waited for: each request has the call's deadline."""
    seen = record_deadlines(rig, monkeypatch)
    deadline = rig.clock.mono() + 15.0
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=deadline)
    assert decision.row == Row.CONFIRMED
    asked = {name for name, _d in seen}
    assert {"find_vms", "get_vpg", "entity_types", "tag_checkpoint", "get_task"} <= asked
    assert {d for _n, d in seen} == {deadline}
    seen.clear()
    rig.clock.advance(5.0)
    later = rig.clock.mono() + 15.0
    reuse = rig.guard().decide(
        rig.call("jp-ubuntu", started_at=rig.clock.wall() - 6.0), deadline=later
    )
    assert (reuse.row, rig.zvm.tag_requests("jp-local")) == (Row.CONFIRMED, 1)
    assert ("list_checkpoints", later) in seen  # the journal confirms the recorded landing
    assert {d for _n, d in seen} == {later}


def test_a_catalog_named_vpg_is_looked_up_within_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from unit.core.guard_fakes import rig_with

    rig = rig_with(tmp_path, {"mcp__v__host_op": {"vpgs": ["jp-local"]}})
    seen = record_deadlines(rig, monkeypatch)
    deadline = rig.clock.mono() + 15.0
    call = ToolCall("mcp__v__host_op", {}, started_at=rig.clock.wall())
    assert rig.guard().decide(call, deadline=deadline).row == Row.CONFIRMED
    assert ("find_vpg", deadline) in seen


def test_the_late_recheck_asks_the_vpg_just_past_the_deadline(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the wait, the re-read of a late VPG may use half a second past the deadline
    (its answer decides between pending and failed). Paused only after the in-wait look
    (which found it still replicating), the pause is caught by that last re-read."""
    rig.zvm.tag_behaviour("jp-local", "never")
    rig.clock.at(rig.clock.wall() + 8.0, lambda: rig.zvm.pause("jp-local"))
    seen = record_deadlines(rig, monkeypatch)
    deadline = rig.clock.mono() + 15.0
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=deadline)
    assert decision.row == Row.FAILED
    # inspection, the one look once the tag is late, the last re-read past the deadline
    assert [d for n, d in seen if n == "get_vpg"] == [deadline, deadline, deadline + 0.5]


def test_a_vpg_paused_mid_wait_fails_as_soon_as_its_tag_is_late(rig: Rig) -> None:
    """The pause is seen at the first poll past the expected landing, not at the deadline."""
    rig.clock.at(rig.clock.wall() + 0.5, lambda: rig.zvm.pause("jp-local"))
    started = rig.clock.mono()
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=started + 60.0)
    assert decision.row == Row.FAILED
    assert "stopped taking checkpoints" in decision.reason
    assert rig.clock.mono() - started < 10.0


def test_budget_deadline() -> None:
    def at(timeout_s: float) -> float:
        settings = SimpleNamespace(guard=SimpleNamespace(timeout_s=timeout_s))
        return budget_deadline(settings, 100.0)  # type: ignore[arg-type]

    assert at(150.0) == pytest.approx(249.0)  # one second before the budget
    assert at(5.0) == pytest.approx(104.5)  # a tenth of a short budget
    assert at(1.0) == pytest.approx(100.9)
    assert at(0.2) == pytest.approx(100.5)  # never less than half a second


# ---------------------------------------------------------------- entity types


class TypesZvm:
    def __init__(self, names: list[str] | Exception) -> None:
        self.settings = SimpleNamespace(url="https://zvm.types.test")
        self.names = names
        self.asked: list[Any] = []

    def entity_types(self, *, deadline: float | None = None) -> list[str]:
        self.asked.append(deadline)
        if isinstance(self.names, Exception):
            raise self.names
        return list(self.names)


def test_entity_types_are_asked_once_then_cached_per_zvm(tmp_path: Path) -> None:
    state = GuardState(str(tmp_path / "state"))
    zvm = TypesZvm(["VCVpg", "PublicCloud-AWS"])
    assert entity_type_names(zvm, state, deadline=7.0) == ["VCVpg", "PublicCloud-AWS"]  # type: ignore[arg-type]
    assert state.cached("entitytypes", "https://zvm.types.test", 60.0) == [
        "VCVpg",
        "PublicCloud-AWS",
    ]
    zvm.names = ["changed"]
    assert entity_type_names(zvm, state) == ["VCVpg", "PublicCloud-AWS"]  # type: ignore[arg-type]
    assert zvm.asked == [7.0]


def test_entity_types_without_state_or_remember_are_not_stored(tmp_path: Path) -> None:
    state = GuardState(str(tmp_path / "state"))
    zvm = TypesZvm(["VCVpg"])
    assert entity_type_names(zvm, None) == ["VCVpg"]  # type: ignore[arg-type]
    assert entity_type_names(zvm, state, remember=False) == ["VCVpg"]  # type: ignore[arg-type]
    assert state.cached("entitytypes", "https://zvm.types.test", 60.0) is None
    assert len(zvm.asked) == 2


def test_an_older_zvm_without_entity_types_gives_an_empty_list_and_remembers_it(
    tmp_path: Path,
) -> None:
    from zerto_rewind.errors import ApiError

    state = GuardState(str(tmp_path / "state"))
    zvm = TypesZvm(ApiError("not found", method="GET", url="/v1/vpgs/entitytypes", status=404))
    assert entity_type_names(zvm, state) == []  # type: ignore[arg-type]
    assert state.cached("entitytypes", "https://zvm.types.test", 60.0) == []


def test_the_guard_uses_the_zvms_entity_types_and_the_config_overrides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ZVM's own type names decide the site kind (cached in the state), and
    guard.site_types overrides them."""
    rig = Rig(tmp_path, timeout_s=20.0)
    monkeypatch.setattr(rig.zvm, "entity_types", lambda **_k: ["HyperV", "VCVpg"])
    first = rig.decide("jp-ubuntu")
    assert first.vpgs[0].site_kind == "hyperv"  # entity 0 is HyperV on this ZVM
    assert rig.state.cached("entitytypes", URL, 60.0) == ["HyperV", "VCVpg"]
    rig.settings = make_settings(tmp_path, timeout_s=20.0, site_types={"0": "azure"})
    rig.clock.advance(30.0)
    assert rig.decide("jp-ubuntu").vpgs[0].site_kind == "azure"


# ---------------------------------------------------------------- several VPGs, late


def test_the_late_recheck_looks_at_every_pending_vpg_not_the_confirmed_ones(rig: Rig) -> None:
    """jp-local lands, multi-a and multi-b never do; multi-b is paused mid-wait (caught by
    the look once its tag is late) and multi-a cannot be read (neither then nor at the last
    re-read): failed (multi-b's reason), and the confirmed VPG is not re-read."""
    rig.zvm.tag_behaviour("multi-a", "never")
    rig.zvm.tag_behaviour("multi-b", "never")
    rig.clock.at(rig.clock.wall() + 0.5, lambda: rig.zvm.pause("multi-b"))
    reads: dict[str, int] = {}
    original = rig.zvm.get_vpg

    def get_vpg(vpg_id: str, **kwargs: Any) -> Any:
        name = rig.zvm.name_of(vpg_id)
        reads[name] = reads.get(name, 0) + 1
        if name == "multi-a" and reads[name] > 1:
            from zerto_rewind.errors import ZvmTimeout

            raise ZvmTimeout("GET /v1/vpgs timed out")
        return original(vpg_id, **kwargs)

    rig.zvm.get_vpg = get_vpg  # type: ignore[method-assign]
    decision = rig.guard().decide(rig.call("jp-ubuntu", "multi-1"), deadline=rig.clock.mono() + 8)
    rows = {o.vpg_name: o.row for o in decision.vpgs}
    assert rows == {"jp-local": Row.CONFIRMED, "multi-a": Row.PENDING, "multi-b": Row.FAILED}
    assert "stopped taking checkpoints" in decision.reason
    assert reads == {"jp-local": 1, "multi-a": 3, "multi-b": 2}


def test_a_call_that_ends_pending_is_planned_once(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pending after the wait is the answer: no second round of planning (that round is
    only for a tag another call used up)."""
    rig.zvm.tag_behaviour("jp-local", "never")
    plans: list[str] = []  # jp-local: waited for; CMH-AWS-1: beyond the budget
    original = tagging.Tagger.plan

    def counting(self: Any, vpg: Any, *args: Any, **kwargs: Any) -> Any:
        plans.append(vpg.name)
        return original(self, vpg, *args, **kwargs)

    monkeypatch.setattr(tagging.Tagger, "plan", counting)
    decision = rig.guard().decide(rig.call("jp-ubuntu"), deadline=rig.clock.mono() + 8.0)
    assert (decision.row, plans) == (Row.PENDING, ["jp-local"])
    assert rig.decide("win2019-1").row == Row.PENDING
    assert plans == ["jp-local", "CMH-AWS-1"]


def test_a_second_round_keeps_the_site_kind(rig: Rig) -> None:
    """The tag was used up between landing and consume: the second round's outcome still
    knows the VPG's site kind."""
    rig.decide("jp-ubuntu")
    rig.clock.advance(30.0)
    vpg_id = rig.zvm.vpg_id("jp-local")
    with rig.state.vpg(vpg_id) as record:
        record.allowed_since_landing = 0
    rig.state.locks.clear()

    def someone_else_consumes() -> None:
        with rig.state.vpg(vpg_id) as record:
            record.allowed_since_landing += 1

    rig.state.before_lock(vpg_id, 2, someone_else_consumes)
    second = rig.decide("jp-ubuntu")
    assert (second.row, second.vpgs[0].site_kind) == (Row.CONFIRMED, "vcenter")
    assert (second.vpgs[0].vpg_name, second.vpgs[0].vms) == ("jp-local", ("jp-ubuntu",))
    assert rig.zvm.tag_requests("jp-local") == 2


# ---------------------------------------------------------------- the decision's fields


@pytest.mark.parametrize(
    ("vms", "row"),
    [
        (("jp-ubuntu",), Row.CONFIRMED),
        (("win2019-1", "web-az-1"), Row.PENDING),
        (("sql-paused-1", "new-vm-1"), Row.FAILED),
        (("ghost", "jp-ubuntu"), Row.VM_UNKNOWN),
    ],
)
def test_a_decision_names_its_tool_and_vms(rig: Rig, vms: tuple[str, ...], row: str) -> None:
    decision = rig.decide(*vms)
    assert (decision.row, decision.tool_name, decision.vms) == (row, TOOL, vms)


def test_several_pending_and_failed_vpgs_are_each_named_in_the_reason(rig: Rig) -> None:
    pending = rig.decide("win2019-1", "web-az-1")
    aws, azure = pending.vpgs
    assert (
        f"expected in the journal by {_t(aws.expected_at)}. tag {azure.tag!r} was requested"
        in pending.reason
    )
    failed = rig.decide("sql-paused-1", "new-vm-1")
    assert "then retry VPG 'syncing-vpg' (new-vm-1): " in failed.reason


def test_a_failed_vpg_with_several_vms_lists_them(rig: Rig) -> None:
    outcome = VpgOutcome("id", "big", ("vm-a", "vm-b"), row=Row.FAILED, reason="paused")
    decision = rig.guard()._combine(ToolCall(TOOL, {}), ("vm-a", "vm-b"), [outcome])
    assert decision.reason.endswith("run. VPG 'big' (vm-a, vm-b): paused")


def test_an_error_names_every_vm_of_the_call(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    from zerto_rewind.errors import ZvmTimeout

    def timeout(*_args: object, **_kwargs: object) -> None:
        raise ZvmTimeout("slow")

    monkeypatch.setattr(rig.zvm, "find_vms", timeout)
    decision = rig.decide("jp-ubuntu", "win2019-1")
    assert decision.reason.startswith(f"zerto-rewind denied {TOOL} on jp-ubuntu, win2019-1: ")
    assert (decision.tool_name, decision.vms) == (TOOL, ("jp-ubuntu", "win2019-1"))


def test_several_unknown_vms_are_listed(rig: Rig) -> None:
    decision = rig.decide("ghost", "ghost-2")
    assert decision.reason.startswith("zerto-rewind: no VPG protects ghost, ghost-2 (the ZVM")


def test_the_rewind_tool_is_named_in_the_context(rig: Rig) -> None:
    guard = Guard(
        rig.settings,
        client=rig.zvm,  # type: ignore[arg-type]
        state=rig.state,
        wall=rig.clock.wall,
        mono=rig.clock.mono,
        sleep=rig.clock.sleep,
        rewind_tool="mcp__zr__zerto_recovery_plan",
    )
    decision = guard.decide(rig.call("jp-ubuntu"))
    assert "mcp__zr__zerto_recovery_plan(" in decision.context


def test_a_no_vm_allow_names_the_catalog_entry_that_allowed_it(tmp_path: Path) -> None:
    from unit.core.guard_fakes import decide, rig_with

    rig = rig_with(tmp_path, {"mcp__v__create_*": {"decision": "allow"}})
    decision = decide(rig, "mcp__v__create_vm", {})
    assert (decision.outcome, decision.tool_name) == (Outcome.NONE, "mcp__v__create_vm")
    assert "the catalog entry 'mcp__v__create_*' says it changes no existing VM" in decision.reason
    for tools, tool in (
        ({"mcp__v__d": {"vm_arg": "name", "decision": "deny"}}, "mcp__v__d"),
        ({"mcp__v__p": {"vm_arg": "name"}}, "mcp__v__p"),
    ):
        other = rig_with(tmp_path, tools)
        assert decide(other, tool, {}).tool_name == tool


def test_errors_and_config_errors_name_the_tool(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    from zerto_rewind.core import guard as guard_module
    from zerto_rewind.errors import ConfigError

    def broken(*_args: object) -> None:
        raise ConfigError("bad", path="/c.json")

    monkeypatch.setattr(guard_module, "classify", broken)
    assert rig.decide("jp-ubuntu").tool_name == TOOL


# ---------------------------------------------------------------- lazy collaborators


def test_the_guard_opens_its_state_and_client_on_first_use(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    guard = Guard(settings)
    state = guard.state()
    assert isinstance(state, GuardState)
    assert state.root == settings.state_dir
    assert guard.state() is state
    client = guard.client()
    assert client.settings is settings.zvm
    assert client._tokens.cache is not None
    assert guard.client() is client
    guard.close()


def test_the_guard_opens_a_redis_state_when_the_config_names_one(tmp_path: Path) -> None:
    from zerto_rewind.core.state_redis import RedisGuardState

    settings = make_settings(tmp_path)
    settings.state_url = "redis://127.0.0.1:1/0"
    assert isinstance(Guard(settings).state(), RedisGuardState)


def _t(epoch: float | None) -> str:
    from zerto_rewind.core.decision import fmt_time

    return fmt_time(epoch or 0.0)


@pytest.mark.parametrize("rewind_tool", [None, "mcp__zr__zerto_recovery_plan"])
def test_the_context_has_a_line_per_vpg_with_its_checkpoint_and_the_way_back(
    rig: Rig, rewind_tool: str | None
) -> None:
    """One line for the call, then one per VPG: a catalog-named VPG (no VMs), then a VPG of
    two VMs whose landing time is unknown; each says how to rewind."""
    named = VpgOutcome("id-1", "infra", (), site_kind="vcenter", tag="t1", landed_at=1.8e9)
    named.checkpoint_id = "cp-1"
    two = VpgOutcome("id-2", "apps", ("vm-a", "vm-b"), site_kind="aws", tag="t2")
    two.checkpoint_id = "cp-2"
    guard = Guard(rig.settings, client=rig.zvm, state=rig.state, rewind_tool=rewind_tool)  # type: ignore[arg-type]
    decision = guard._combine(ToolCall(TOOL, {}), ("vm-a", "vm-b"), [named, two])
    first, vpg_line, vm_line, unverified = decision.context.split("\n")
    assert unverified.startswith("- The VM's identity was not verified: ")
    assert "as 'vm-a', 'vm-b', found by name" in unverified
    assert first == f"zerto-rewind: a Zerto checkpoint protects this {TOOL} call."
    assert vpg_line.startswith("- VPG 'infra' (vcenter): checkpoint cp-1 tagged 't1' at 2027-")
    assert "(Zerto failover test or failover)." in vpg_line
    assert vm_line.startswith(
        "- VM vm-a, vm-b: VPG 'apps' (aws), checkpoint cp-2 tagged 't2' at unknown time. "
        "To rewind: "
    )
    if rewind_tool:
        assert vm_line.endswith(
            f"the MCP tool {rewind_tool}(vm='vm-a', checkpoint='cp-2') lists the ways back."
        )
    else:
        assert vm_line.endswith(
            "`zerto-rewind checkpoints vm-a --tagged` lists the tagged checkpoints; then recover "
            "VPG 'apps' to checkpoint 'cp-2' (Zerto failover test or failover)."
        )


def test_a_landed_checkpoint_names_the_rewind_command_a_person_runs(rig: Rig) -> None:
    """With its landing time known, the way back is `zerto-rewind rewind --vm VM --before
    LANDED`: the plan's rewind point is then the checkpoint of this VM's change after it.
    The VM name is quoted for a shell."""
    landed = 1.8e9
    vpg = VpgOutcome("id-2", "apps", ("web 01",), site_kind="vcenter", tag="t2", landed_at=landed)
    vpg.checkpoint_id = "cp-2"
    guard = Guard(rig.settings, client=rig.zvm, state=rig.state)  # type: ignore[arg-type]
    context = guard._combine(ToolCall(TOOL, {}), ("web 01",), [vpg]).context
    command = f"`zerto-rewind rewind --vm 'web 01' --before {_t(landed)} --dry-run`"
    assert f"To rewind: a person runs {command} to see the plan that restores 'web 01' " in context
    assert "then runs it without --dry-run; by hand, `zerto-rewind checkpoints" in context


def test_decide_counts_the_call_as_a_change_by_default(rig: Rig) -> None:
    """The hook's call (no consume argument) uses up the landed tag; read-only names its tool."""
    decision = rig.guard().decide(rig.call("jp-ubuntu"))
    assert decision.row == Row.CONFIRMED
    assert rig.state.peek_vpg(rig.zvm.vpg_id("jp-local")).allowed_since_landing == 1
    read_only = rig.guard().decide(ToolCall("mcp__vsphere__list_vms", {}))
    assert (read_only.row, read_only.tool_name) == (Row.READ_ONLY, "mcp__vsphere__list_vms")


def test_the_task_asked_during_the_wait_gets_the_deadline_too(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.zvm.tag_behaviour("jp-local", "fail", reason="VRA down")
    seen = record_deadlines(rig, monkeypatch)
    deadline = rig.clock.mono() + 15.0
    assert rig.guard().decide(rig.call("jp-ubuntu"), deadline=deadline).row == Row.FAILED
    assert [d for n, d in seen if n == "get_task"] == [deadline, deadline]


def test_a_retrys_look_at_a_due_tag_gets_the_deadline(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.zvm.tag_behaviour("jp-local", "never")
    first = rig.guard().decide(rig.call("jp-ubuntu"), deadline=rig.clock.mono() + 1.0)
    assert first.row == Row.PENDING
    rig.clock.advance(15.0)  # due, not yet overdue
    seen = record_deadlines(rig, monkeypatch)
    deadline = rig.clock.mono() + 1.0
    rig.guard().decide(rig.call("jp-ubuntu"), deadline=deadline)
    assert ("list_checkpoints", deadline) in seen
    assert {d for _n, d in seen} <= {deadline, deadline + 0.5}  # + the late re-read


def test_a_vpg_paused_after_the_taggers_look_is_caught_by_the_last_re_read(rig: Rig) -> None:
    """multi-a and multi-b never land; multi-b is paused late (after the tagger's one look
    at it) and multi-a cannot be read at the end: the last re-read goes on past multi-a's
    error and fails multi-b with the reason."""
    rig.zvm.tag_behaviour("multi-a", "never")
    rig.zvm.tag_behaviour("multi-b", "never")
    late = rig.clock.wall() + 12.0
    rig.clock.at(late, lambda: rig.zvm.pause("multi-b"))
    original = rig.zvm.get_vpg

    def get_vpg(vpg_id: str, **kwargs: Any) -> Any:
        if rig.zvm.name_of(vpg_id) == "multi-a" and rig.clock.wall() >= late:
            from zerto_rewind.errors import ZvmTimeout

            raise ZvmTimeout("GET /v1/vpgs timed out")
        return original(vpg_id, **kwargs)

    rig.zvm.get_vpg = get_vpg  # type: ignore[method-assign]
    decision = rig.guard().decide(rig.call("multi-1"), deadline=rig.clock.mono() + 15)
    rows = {o.vpg_name: o.row for o in decision.vpgs}
    assert rows == {"multi-a": Row.PENDING, "multi-b": Row.FAILED}
    multi_b = next(o for o in decision.vpgs if o.vpg_name == "multi-b")
    assert multi_b.reason.endswith(
        f"(it stopped taking checkpoints while tag {multi_b.tag!r} was pending)"
    )


def test_a_hooks_checkpoint_note_says_the_vms_identity_was_not_verified(rig: Rig) -> None:
    """A hook (or the service a thin hook asks) cannot ask the VM server which VM it means."""
    decision = rig.decide("jp-ubuntu")
    assert decision.row == Row.CONFIRMED
    assert "The VM's identity was not verified" in decision.context
    assert "as 'jp-ubuntu', found by name" in decision.context
    assert "another folder" in decision.context


def test_the_gateway_adds_the_unverified_line_itself(rig: Rig) -> None:
    """The gateway's own calls: only it knows whether its identity check ran (gateway/calls.py)."""
    decision = rig.guard().decide(ToolCall(TOOL, {"name": "jp-ubuntu"}, origin="gateway"))
    assert decision.row == Row.CONFIRMED
    assert "not verified" not in decision.context
