"""The checkpoint tag's name: readable, traceable, safe and short (tagging.tag_name)."""

from __future__ import annotations

import calendar
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerto_rewind.core.decision import ToolCall
from zerto_rewind.core.tagging import TAG_MAX, tag_name

NOW = calendar.timegm((2024, 5, 17, 13, 45, 9)) + 0.75
SAFE = re.compile(r"[A-Za-z0-9 ._:=,\-]*")


def call(tool: str = "mcp__vsphere__power_off", session: str | None = "0f3c9a1e-77aa") -> ToolCall:
    """A ToolCall with just the fields a tag name uses."""
    return ToolCall(tool, {"name": "ignored", "password": "hunter2"}, session_id=session)


def test_readable_layout() -> None:
    """prefix, tool (no mcp__, . for __), VMs, s=<8-char session>, UTC time, in that order."""
    name = tag_name("zerto-rewind", call(), ("web01", "db02"), NOW)
    assert name == "zerto-rewind vsphere.power_off web01,db02 s=0f3c9a1e 2024-05-17T13:45:09Z"


def test_non_mcp_tool_kept() -> None:
    """A host tool like Bash keeps its name."""
    name = tag_name("zr", call("Bash"), ("web01",), NOW)
    assert name.startswith("zr Bash web01 s=")


def test_no_session() -> None:
    """Without a session id the tag has no session part (never a made-up ``s=nosessio``)."""
    for session in (None, ""):
        name = tag_name("zr", call(session=session), ("web01",), NOW)
        assert name == "zr vsphere.power_off web01 2024-05-17T13:45:09Z"


def test_time_is_utc() -> None:
    """The time is the UTC wall clock of ``now``, whatever the local zone."""
    assert tag_name("zr", call(), ("a",), 0.0).endswith(" 1970-01-01T00:00:00Z")


def test_unsafe_characters_replaced() -> None:
    """Characters outside the safe set become '_' (quotes, slashes, unicode, newlines)."""
    name = tag_name('z"r', call("mcp__a/b__c'd", session="é;\n$(x)"), ("vm\u00e9/1",), NOW)
    assert name == "z_r a_b.c_d vm__1 s=_____x_ 2024-05-17T13:45:09Z"
    assert SAFE.fullmatch(name)


def test_many_long_vm_names_truncated_to_limit() -> None:
    """Many long VM names are shortened with '...' so session and time stay in ≤ 100 chars."""
    vms = tuple(f"very-long-virtual-machine-name-{i:03d}.corp.example" for i in range(40))
    name = tag_name("zerto-rewind", call(), vms, NOW)
    assert len(name) <= TAG_MAX == 100
    assert "..." in name
    assert name.startswith("zerto-rewind vsphere.power_off very-long-virtual-machine-name-000")
    assert name.endswith(" s=0f3c9a1e 2024-05-17T13:45:09Z")


def test_exactly_fitting_names_not_truncated() -> None:
    """VM text that just fits is kept whole."""
    fixed = len("zr t s=0f3c9a1e 2024-05-17T13:45:09Z") + 1
    vm = "v" * (TAG_MAX - fixed)
    name = tag_name("zr", call("t"), (vm,), NOW)
    assert len(name) == TAG_MAX
    assert vm in name
    assert "..." not in name


_text = st.text(max_size=60)


@settings(max_examples=200, deadline=None, database=None)
@given(
    prefix=st.text(min_size=1, max_size=40),
    tool=st.text(min_size=1, max_size=80),
    session=st.none() | _text,
    vms=st.lists(st.text(min_size=1, max_size=80), min_size=1, max_size=30),
    now=st.floats(min_value=0, max_value=4e9),
)
def test_always_safe_and_bounded(
    prefix: str, tool: str, session: str | None, vms: list[str], now: float
) -> None:
    """Whatever the inputs, the tag has only safe characters and at most 100 of them."""
    name = tag_name(prefix, call(tool, session), tuple(vms), now)
    assert len(name) <= TAG_MAX
    assert SAFE.fullmatch(name), name


@settings(max_examples=200, deadline=None, database=None)
@given(
    vms=st.lists(
        st.text(alphabet="abcdefghij-0123456789.", min_size=1, max_size=60),
        min_size=1,
        max_size=30,
    )
)
def test_session_and_time_survive_with_usual_prefix(vms: list[str]) -> None:
    """With a usual prefix and tool, session and time are never cut, however many VMs."""
    name = tag_name("zerto-rewind", call(), tuple(vms), NOW)
    assert name.endswith(" s=0f3c9a1e 2024-05-17T13:45:09Z")
    assert name.startswith("zerto-rewind vsphere.power_off ")


def test_long_tool_name_keeps_session_and_time() -> None:
    """A tool name near the 64-character MCP limit still leaves session and time readable."""
    tool = "mcp__vmware-vsphere-prod__virtual_machine_power_operation_off"
    name = tag_name("zerto-rewind", call(tool), ("web01",), NOW)
    assert len(name) <= TAG_MAX
    assert name.endswith(" s=0f3c9a1e 2024-05-17T13:45:09Z")


@pytest.mark.parametrize("vms", [(), ("a",), ("web01", "db02")])
def test_arguments_other_than_vms_never_in_tag(vms: tuple[str, ...]) -> None:
    """Only the VM names of the call appear, never other argument values."""
    name = tag_name("zr", call(), vms, NOW)
    parts = ("zr", "vsphere.power_off", ",".join(vms), "s=0f3c9a1e 2024-05-17T13:45:09Z")
    assert name == " ".join(p for p in parts if p)  # nothing but prefix, tool, VMs, tail
    for value in ("hunter2", "ignored", "password"):  # the call's other arguments
        assert value not in name
