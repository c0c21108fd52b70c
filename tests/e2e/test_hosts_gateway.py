"""The gateway in the real Codex, Gemini CLI and Copilot CLI, as ``install mcp-host`` wires it.

Per host, as a user would: the host's own ``mcp add`` writes a plain ``vsphere`` entry that
starts mcvsphere with the vCenter credentials in its ``env``; the real ``zerto-rewind install
mcp-host`` moves it (credentials and all) into the gateway's config and points the host at
``zerto-rewind gateway --stdio``. The host then runs headless in its most permissive mode
against a scripted model on loopback (``fake_models``), with no hook.

What happened is read back from the vCenter (vcsim, over pyVmomi: did the VM change), the
ZVM simulator (tag counters, the journal's tagged checkpoints), the gateway's decision log
and what the scripted model was sent. One vcsim, ZVM simulator and scripted model serve
the module; each host has its own HOME.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_models import FakeModels, call
from e2e.gateway_e2e import CONFIRMED_VPG, DEFAULT_VMS, FAILED_VPG, SERVER, VM, GatewayRig
from e2e.guarded import parse_time
from e2e.hosts_e2e import (
    HOSTS,
    HostHome,
    HostSession,
    host_path,
    list_vms_reaches_the_model,
    only,
    remote_peers,
)
from support.realvm import mcvsphere_command
from zerto_rewind.gateway.upstream_user import ALLOW_FLAG

CHECKPOINT_NOTE = "zerto-rewind: a Zerto checkpoint protects this"
# The clientInfo each host's MCP client sends (the decision log's `host`).
CLIENT_INFO = {
    "codex": "codex-mcp-client 0.169.0",
    "copilot": "copilot-cli 1.0.102",
    "gemini": "gemini-cli-mcp-client 0.61.0",
}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayRig]:
    with GatewayRig.running(tmp_path_factory.mktemp("hosts-rig"), http=False) as started:
        # No upstream yet: `install mcp-host` moves each host's own mcvsphere entry in.
        started.write_config(upstream=False)
        yield started


Wired = HostSession  # a host whose ``vsphere`` server now is the gateway


@pytest.fixture(scope="module", params=sorted(HOSTS))
def wired(
    request: pytest.FixtureRequest,
    rig: GatewayRig,
    scripted_models: FakeModels,
    tmp_path_factory: pytest.TempPathFactory,
) -> Wired:
    host = HOSTS[str(request.param)]
    model = scripted_models
    host_path(host)
    home = HostHome(host, tmp_path_factory.mktemp(f"host-{host.name}"))
    host.prepare(home, model.url)
    home.add_server(SERVER, mcvsphere_command(), rig.vcenter.mcvsphere_env(), model_url=model.url)
    plain = home.entry(SERVER)
    assert plain["command"] == mcvsphere_command()[0]
    assert plain["env"] == rig.vcenter.mcvsphere_env()
    # The hosts run as root here: the gateway refuses a root upstream unless told.
    home.install_gateway(SERVER, rig.box.config_path, ALLOW_FLAG)
    installed = home.entry(SERVER)
    # What the move promises: the host file keeps no vCenter credential, the gateway has them.
    assert "env" not in installed
    assert rig.vcenter.password not in home.config_file.read_text(encoding="utf-8")
    assert installed["args"][-3:] == ["--config", rig.box.config_path, ALLOW_FLAG]
    assert INSTALLED_KEYS[host.name].items() <= installed.items(), installed
    return Wired(host, home, rig, model, installed=installed)


# What `install mcp-host` writes for each host beside the gateway command.
INSTALLED_KEYS: dict[str, dict[str, Any]] = {
    # required: Codex does not wait for a server that is not (docs/hosts.md, start-up race)
    "codex": {"required": True, "tool_timeout_sec": 33},  # guard budget (3 s) + 30 s
    "copilot": {"type": "local", "tools": ["*"]},
    "gemini": {},
}


def test_confirmed_change_runs_on_one_tag_and_the_model_is_told(wired: Wired) -> None:
    """power_off of a protected VM: one tag lands, the VM really powers off in vcsim, and
    the model's tool result carries the checkpoint."""
    wired.rig.power_on(VM.confirmed)
    tags_before = wired.rig.tag_requests(CONFIRMED_VPG)

    run = wired.run([call(wired.tool("power_off"), name=VM.confirmed)])

    assert wired.tool("power_off") in wired.model.offered_tools(), wired.model.offered_tools()
    assert wired.rig.power_states()[VM.confirmed] == "poweredOff"
    assert wired.rig.tag_requests(CONFIRMED_VPG) == tags_before + 1
    record = only(wired.decisions())
    assert (record["row"], record["decision"]) == ("confirmed", "context")
    assert (record["vms"], record["vpgs"]) == ([VM.confirmed], [CONFIRMED_VPG])
    assert record["host"] == CLIENT_INFO[wired.host.name]  # the MCP client's clientInfo
    [cp] = record["checkpoint_ids"]
    tag, landed = wired.rig.tagged_checkpoints(CONFIRMED_VPG)[cp]
    assert record["tags"] == [tag]
    assert landed <= parse_time(record["time"])
    told = only(wired.model.tool_results())
    assert not told.is_error
    assert f"VM '{VM.confirmed}' powered off" in told.text
    assert CHECKPOINT_NOTE in told.text
    # the guard's block stays apart from the upstream's text, even where a host joins the
    # blocks with nothing between (Copilot): the block starts with a blank line
    assert told.text[told.text.index(CHECKPOINT_NOTE) - 1].isspace(), told.text
    assert f"checkpoint {cp} tagged {tag!r}" in told.text
    # the tag names this connection's session, not a placeholder
    assert f" s={record['session_id'][:8]} " in tag
    assert run.host_calls == [(wired.tool("power_off"), True)]
    assert CHECKPOINT_NOTE in (run.answer or ""), run.describe()


def test_paused_vpg_vm_stays_on_and_the_model_is_told_why(wired: Wired) -> None:
    """A paused VPG cannot take a tag: refused with the reason; mcvsphere never runs."""
    run = wired.run([call(wired.tool("power_off"), name=VM.failed)])

    assert wired.rig.power_states()[VM.failed] == "poweredOn"
    assert wired.rig.tag_requests(FAILED_VPG) == 0
    record = only(wired.decisions())
    assert (record["row"], record["decision"], record["vpgs"]) == ("failed", "deny", [FAILED_VPG])
    told = only(wired.model.tool_results())
    assert record["reason"] in told.text
    assert "paused" in told.text
    assert run.host_calls == [(wired.tool("power_off"), False)]  # the host saw a failed call
    assert "paused" in (run.answer or "")


def test_unknown_vm_is_refused_without_a_human(wired: Wired) -> None:
    """A VM in no VPG needs a person's yes; this gateway names no approver, and the host
    cannot give one, so the call is refused at once and the VM stays on."""
    run = wired.run([call(wired.tool("power_off"), name=VM.unknown)])

    assert wired.rig.power_states()[VM.unknown] == "poweredOn"
    record = only(wired.decisions())
    assert (record["row"], record["decision"]) == ("vm_unknown", "prompt")
    assert record["answer"] == "no_approver"
    told = only(wired.model.tool_results())
    assert record["reason"] in told.text
    assert "no approver configured" in told.text
    assert run.host_calls == [(wired.tool("power_off"), False)]
    assert "no approver configured" in (run.answer or "")


def test_read_only_call_passes_without_a_tag(wired: Wired) -> None:
    """get_vm_info is read-only: it runs (the model reads vcsim's answer) and no tag is made."""
    tags_before = wired.rig.box.tag_requests()

    run = wired.run([call(wired.tool("get_vm_info"), name=VM.spare)])

    assert wired.rig.box.tag_requests() == tags_before
    assert [d for d in wired.decisions() if d["decision"] != "none"] == []
    told = only(wired.model.tool_results())
    assert not told.is_error
    assert VM.spare in told.text
    assert all(vm not in told.text for vm in DEFAULT_VMS if vm != VM.spare)
    assert run.host_calls == [(wired.tool("get_vm_info"), True)]


def test_list_vms_reaches_the_model_except_in_gemini(wired: Wired) -> None:
    """The gateway lets list_vms through (read-only, no tag); Gemini CLI rejects its array
    structuredContent itself ("expected record, received array"), as without the gateway
    (``test_host_hooks.py``)."""
    list_vms_reaches_the_model(wired)


def test_the_first_model_request_offers_the_gateway_tools(wired: Wired) -> None:
    """The gateway answers ``initialize`` only with its upstream's tools ready. Gemini CLI
    and Copilot CLI list them at once: their first model request offers them. Codex does
    not wait that long for a server that is not ``required`` (the stand-in Python server,
    ready sooner, made it): without the ``required = true`` that install writes, its first
    request offered none and the call was "unsupported", never reaching the gateway."""
    codex = wired.host.name == "codex"
    if codex:
        wired.home.edit_entry(SERVER, lambda entry: entry.pop("required"))
    try:
        run = wired.run([call(wired.tool("get_vm_info"), name=VM.spare)])
    finally:
        if codex:
            wired.home.edit_entry(SERVER, lambda entry: entry.update(required=True))

    first = wired.model.main_requests()[0]
    offered = wired.model.offered_tools_of(first)
    told = only(wired.model.tool_results())
    if codex:
        assert wired.tool("get_vm_info") not in offered
        assert told.text == f"unsupported call: {wired.tool('get_vm_info')}"
        assert wired.decisions() == []
    else:
        assert wired.tool("get_vm_info") in offered
        assert run.host_calls == [(wired.tool("get_vm_info"), True)]


@contextlib.contextmanager
def approvals(rig: GatewayRig, section: dict[str, Any]) -> Iterator[None]:
    """The installed gateway config with an ``approvals`` section, for one test."""
    path = Path(rig.box.config_path)
    kept = path.read_text(encoding="utf-8")
    path.write_text(json.dumps({**json.loads(kept), "approvals": section}), encoding="utf-8")
    try:
        yield
    finally:
        path.write_text(kept, encoding="utf-8")


# How each host answered the gateway's question in a headless run (the decision log's
# `answer` lines): Codex takes the classic elicitation request and declines it itself;
# Copilot takes the 2026-07-28 question (InputRequiredResult: logged "asked") and retries
# the call with a decline; Gemini CLI declares no elicitation at all.
ELICITATION_ANSWERS = {
    "codex": ["declined"],
    "copilot": ["asked", "declined"],
    "gemini": ["no_elicitation"],
}
PROMPT_ENDINGS = {
    "declined": "The person asked declined; the call was not run.",
    "no_elicitation": "This MCP client cannot ask a person to approve, so the call was not run.",
}


def test_headless_hosts_never_approve_when_the_gateway_asks_them(wired: Wired) -> None:
    """With ``approvals.trust_client_answers`` the gateway asks the host's own client (the
    agent's side) about an unknown VM. No headless host says yes: the VM stays on."""
    with approvals(wired.rig, {"trust_client_answers": True}):
        run = wired.run([call(wired.tool("power_off"), name=VM.unknown)])

    assert wired.rig.power_states()[VM.unknown] == "poweredOn"
    records = wired.decisions()
    expected = ELICITATION_ANSWERS[wired.host.name]
    assert [(d["row"], d["answer"]) for d in records] == [("vm_unknown", a) for a in expected]
    told = only(wired.model.tool_results())
    assert PROMPT_ENDINGS[expected[-1]] in told.text
    assert run.host_calls == [(wired.tool("power_off"), False)]


def test_the_host_reaches_nothing_but_loopback(wired: Wired, tmp_path: Path) -> None:
    """strace over the host and every child (the gateway, mcvsphere): each socket address
    connected or sent to is on loopback; not even a DNS lookup leaves the machine."""
    trace = tmp_path / "socket-calls.strace"
    wired.model.reset([call(wired.tool("get_vm_info"), name=VM.spare)])

    run = wired.home.run(wired.model.url, trace=trace)

    assert run.ok, run.describe()
    assert run.host_calls == [(wired.tool("get_vm_info"), True)]  # the gateway was reached
    assert "127.0.0.1" in trace.read_text(encoding="utf-8")
    assert remote_peers(trace) == []


def test_the_host_file_keeps_its_other_keys(wired: Wired) -> None:
    """The move kept the host's own settings beside the entry (the model provider, auth)."""
    text = wired.home.config_file.read_text(encoding="utf-8")
    if wired.host.name == "codex":
        assert 'wire_api = "responses"' in text
    if wired.host.name == "gemini":
        assert '"selectedType": "gemini-api-key"' in text
    if wired.host.name == "copilot":
        assert wired.installed.get("tools") == ["*"]
