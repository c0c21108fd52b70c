"""The gateway's identity check (gateway/identity.py) over a fake upstream: one resolver call
per confirmed decision at most, and every failure is a prompt, never a silent forward."""

from __future__ import annotations

import json
from typing import Any

import anyio
import mcp_types as types
import pytest

from zerto_rewind.config.settings import CatalogSettings, ResolverSpec, ToolSpec, VmPath
from zerto_rewind.core.decision import Decision, Outcome, Row, VmIdentity, VpgOutcome
from zerto_rewind.gateway.identity import check_identity, resolver_identity, zerto_identity
from zerto_rewind.gateway.upstream import UpstreamError

TOOL = "mcp__vsphere__power_off"
VCENTER = "d4a6a1d5-79e9-4308-990a-7c3e616f0908"
ZERTO_ID = f"{VCENTER}.vm-42"
OTHER_VCENTER = "5be1e2c0-0000-4000-8000-00000000d00d"


class FakeUpstream:
    """Answers the resolver with ``answer`` (a dict, a result, or an exception)."""

    name = "vsphere"

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[tuple[str, dict[str, Any], float]] = []

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, timeout_s: float
    ) -> types.CallToolResult:
        self.calls.append((name, dict(arguments or {}), timeout_s))
        if isinstance(self.answer, BaseException):
            raise self.answer
        if isinstance(self.answer, types.CallToolResult):
            return self.answer
        text = types.TextContent(type="text", text=json.dumps(self.answer))
        return types.CallToolResult(content=[text], structured_content=self.answer)


def catalog(**resolver: Any) -> CatalogSettings:
    spec = {"tool": "get_vm_info", "arg": "name", "id_path": "moid", "timeout_s": 4.0,
            "vcenter": VCENTER}  # fmt: skip
    spec.update(resolver)
    tools = {TOOL: ToolSpec(TOOL, (VmPath("name"),), None)}
    return CatalogSettings(
        ("mcp__vsphere__get_*",),
        tools,
        None,
        "prompt",
        "default",
        resolvers={"vsphere": ResolverSpec(server="vsphere", **spec)},
    )


def confirmed(*vms: str, instance: str | None = None) -> Decision:
    vpg = VpgOutcome("vpg-1", "web-vpg", vms, checkpoint_id="77", tag="zr-1")
    return Decision(
        Row.CONFIRMED,
        Outcome.CONTEXT,
        TOOL,
        context="checkpoint 77",
        vms=vms,
        vpgs=[vpg],
        identities={vm: VmIdentity(ZERTO_ID, instance) for vm in vms},
        vm_args={vm: vm for vm in vms},
    )


def check(cat: CatalogSettings, upstream: FakeUpstream, decision: Decision) -> Decision:
    async def main() -> Decision:
        return await check_identity(cat, upstream, decision)  # type: ignore[arg-type]

    return anyio.run(main)


def test_the_same_vm_passes_with_one_resolver_call_with_the_calls_argument() -> None:
    upstream = FakeUpstream({"name": "web-01", "moid": "vm-42"})
    decision = confirmed("web-01")
    decision = decision.but(vm_args={"web-01": "web-01.corp.example"})  # vm_map stripped the domain
    assert check(catalog(), upstream, decision) is decision
    assert upstream.calls == [("get_vm_info", {"name": "web-01.corp.example"}, 4.0)]


def test_another_vm_prompts_naming_both_identities_and_the_checkpoint() -> None:
    upstream = FakeUpstream({"moid": "vm-43"})
    result = check(catalog(), upstream, confirmed("web-01"))
    assert (result.row, result.outcome) == (Row.VM_IDENTITY, Outcome.PROMPT)
    assert "vm-43" in result.reason
    assert "vm-42" in result.reason
    assert "different VMs" in result.reason
    assert "checkpoint 77" in result.reason
    assert result.vpgs[0].checkpoint_id == "77"
    assert len(upstream.calls) == 1


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (
            UpstreamError("the VM MCP server 'vsphere' did not answer get_vm_info within 4 s"),
            "failed",
        ),
        (UpstreamError("the VM MCP server 'vsphere' is not connected"), "failed"),
        (
            types.CallToolResult(
                content=[types.TextContent(type="text", text="VM 'web-01' not found")],
                is_error=True,
            ),
            "answered with an error",
        ),
        ({"name": "web-01"}, "without a value at 'moid'"),
        ({"moid": None}, "without a value at 'moid'"),
        ({"moid": ""}, "without a value at 'moid'"),
        ({"moid": True}, "without a value at 'moid'"),
        (
            types.CallToolResult(content=[types.TextContent(type="text", text="not json")]),
            "without a value at 'moid'",
        ),
    ],
)
def test_a_resolver_that_fails_prompts(answer: Any, said: str) -> None:
    upstream = FakeUpstream(answer)
    result = check(catalog(), upstream, confirmed("web-01"))
    assert (result.row, result.outcome) == (Row.VM_IDENTITY, Outcome.PROMPT)
    assert said in result.reason
    assert len(upstream.calls) == 1


def test_no_resolver_or_no_checkpoint_means_no_resolver_call() -> None:
    upstream = FakeUpstream({"moid": "vm-43"})
    bare = catalog()
    bare.resolvers = {}
    decision = confirmed("web-01")
    assert check(bare, upstream, decision) is decision
    unknown = Decision(Row.VM_UNKNOWN, Outcome.PROMPT, TOOL, reason="r", vms=("x",))
    assert check(catalog(), upstream, unknown) is unknown
    host_level = Decision(Row.CONFIRMED, Outcome.CONTEXT, TOOL, vpgs=confirmed("a").vpgs)
    assert check(catalog(), upstream, host_level) is host_level
    assert upstream.calls == []


def test_several_vms_prompt_without_a_resolver_call() -> None:
    upstream = FakeUpstream({"moid": "vm-42"})
    result = check(catalog(), upstream, confirmed("a", "b"))
    assert (result.row, result.outcome) == (Row.VM_IDENTITY, Outcome.PROMPT)
    assert "2 VMs" in result.reason
    assert upstream.calls == []


def test_a_zerto_identifier_the_pattern_does_not_read_prompts_without_a_call() -> None:
    upstream = FakeUpstream({"moid": "vm-42"})
    result = check(catalog(zerto_pattern=r"^(?P<id>host-[0-9]+)$"), upstream, confirmed("w"))
    assert result.row == Row.VM_IDENTITY
    assert "zerto_pattern" in result.reason
    assert upstream.calls == []


def test_a_resolver_the_catalog_does_not_call_read_only_prompts_without_a_call() -> None:
    upstream = FakeUpstream({"moid": "vm-42"})
    result = check(catalog(tool="power_off"), upstream, confirmed("w"))
    assert result.row == Row.VM_IDENTITY
    assert "not a read-only tool" in result.reason
    result = check(catalog(tool="describe_vm"), upstream, confirmed("w"))  # unlisted
    assert result.row == Row.VM_IDENTITY
    assert upstream.calls == []


def test_instance_uuid_against_the_links_instance_identifier() -> None:
    cat = catalog(
        id_path="instance_uuid", zerto_field="instance_identifier", zerto_pattern="^(?P<id>.+)$"
    )
    same = FakeUpstream({"instance_uuid": "5012-ab"})
    assert check(cat, same, confirmed("w", instance="5012-ab")).row == Row.CONFIRMED
    other = FakeUpstream({"instance_uuid": "5012-cd"})
    assert check(cat, other, confirmed("w", instance="5012-ab")).row == Row.VM_IDENTITY
    missing = FakeUpstream({"instance_uuid": "5012-ab"})
    assert check(cat, missing, confirmed("w", instance=None)).row == Row.VM_IDENTITY
    assert missing.calls == []


def test_zerto_identity_default_pattern_reads_the_moref() -> None:
    spec = ResolverSpec(server="vsphere", tool="get_vm_info", arg="name", id_path="moid")
    assert zerto_identity(VmIdentity(ZERTO_ID), spec) == ("vm-42", VCENTER)
    assert zerto_identity(VmIdentity("no-moref-here"), spec) is None
    assert zerto_identity(None, spec) is None


def test_resolver_identity_reads_structured_wrapped_or_text_answers() -> None:
    wrapped = types.CallToolResult(content=[], structured_content={"result": {"a": {"b": "x"}}})
    assert resolver_identity(wrapped, "a.b") == "x"
    text = types.CallToolResult(content=[types.TextContent(type="text", text='{"n": 7}')])
    assert resolver_identity(text, "n") == "7"
    assert resolver_identity(text, "missing") is None


def test_a_moref_of_another_vcenter_is_another_vm() -> None:
    """vm-42 of dr's vCenter is not hq's vm-42: the vCenter is compared with the moref."""
    upstream = FakeUpstream({"moid": "vm-42", "vc": OTHER_VCENTER})
    result = check(catalog(vcenter=None, vcenter_path="vc"), upstream, confirmed("web-01"))
    assert (result.row, result.outcome) == (Row.VM_IDENTITY, Outcome.PROMPT)
    assert f"vm-42 in vCenter {OTHER_VCENTER}" in result.reason
    assert f"vm-42 in vCenter {VCENTER}" in result.reason
    fixed = check(
        catalog(vcenter=OTHER_VCENTER), FakeUpstream({"moid": "vm-42"}), confirmed("web-01")
    )
    assert fixed.row == Row.VM_IDENTITY
    same = FakeUpstream({"moid": "vm-42", "vc": VCENTER})
    decision = confirmed("web-01")
    assert check(catalog(vcenter=None, vcenter_path="vc"), same, decision) is decision


def test_a_whole_identifier_in_the_answer_is_compared_whole() -> None:
    """A resolver that answers Zerto's own form (<vCenter>.vm-42) needs no vcenter key."""
    decision = confirmed("web-01")
    whole = FakeUpstream({"moid": ZERTO_ID})
    assert check(catalog(vcenter=None), whole, decision) is decision
    other = FakeUpstream({"moid": f"{OTHER_VCENTER}.vm-42"})
    assert check(catalog(vcenter=None), other, confirmed("web-01")).row == Row.VM_IDENTITY


@pytest.mark.parametrize(
    ("resolver", "answer", "said"),
    [
        ({"vcenter": None}, {"moid": "vm-42"}, "names no vCenter (vcenter or vcenter_path)"),
        ({"vcenter": None, "vcenter_path": "vc"}, {"moid": "vm-42"}, "without a value at 'vc'"),
        ({"zerto_pattern": r"^.+\.(?P<id>vm-[0-9]+)$"}, {"moid": "vm-42"}, "has no group"),
    ],
)
def test_a_bare_moref_never_matches(resolver: dict[str, Any], answer: Any, said: str) -> None:
    """Defaults compare whole identities: with no vCenter to compare, the call prompts."""
    result = check(catalog(**resolver), FakeUpstream(answer), confirmed("web-01"))
    assert (result.row, result.outcome) == (Row.VM_IDENTITY, Outcome.PROMPT)
    assert said in result.reason
    assert "may be a VM of any vCenter" in result.reason


def test_an_instance_uuid_is_whole_by_itself() -> None:
    decision = confirmed("web-01", instance="4212-aaaa")
    cat = catalog(vcenter=None, id_path="uuid", zerto_field="instance_identifier",
                  zerto_pattern="^(?P<id>.+)$")  # fmt: skip
    assert check(cat, FakeUpstream({"uuid": "4212-aaaa"}), decision) is decision
