"""The Codex, Gemini CLI and Copilot CLI hooks in the real CLIs, with a VM server not behind
the gateway.

Per host, as a user would: the host's own ``mcp add`` wires mcvsphere **directly** (the
vCenter credentials in the host's file, no gateway), and ``zerto-rewind install host-hook
HOST --user --service unix:SOCK --protect CONFIG`` adds the thin hook of the guard service
(``zerto-rewind gateway --socket``, hook-only, on the ZVM simulator). The host then runs
headless in its most permissive mode against the scripted model (``fake_models``).

The service's own catalog decides each VM call; the hook itself refuses a shell or file
call that would write the guard's config. Outcomes are read from vcsim (pyVmomi), the ZVM
simulator, the service's decision log, the config file's bytes and what the model was sent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.fake_models import FakeModels, call
from e2e.gateway_e2e import CONFIRMED_VPG, FAILED_VPG, SERVER, VM, GatewayRig
from e2e.guarded import parse_time
from e2e.harness import write_json
from e2e.hosts_e2e import HOSTS, HostHome, HostSession, host_path, list_vms_reaches_the_model, only
from support.realvm import mcvsphere_command
from support.service import guard_service

CHECKPOINT_NOTE = "zerto-rewind: a Zerto checkpoint protects this"
# Codex runs a new or changed hook only once trusted; Gemini's `ask` would wait for ever
# in -p, so an unattended Gemini gets --prompt-as deny (docs/install.md).
RUN_FLAGS: dict[str, tuple[str, ...]] = {
    "codex": ("--dangerously-bypass-hook-trust",),
    "gemini": (),
    "copilot": (),
}
INSTALL_FLAGS = {"codex": [], "gemini": ["--prompt-as", "deny"], "copilot": []}
# What each host puts before a hook's denial reason in the tool result the model reads.
BLOCKED = {
    "codex": "Tool call blocked by PreToolUse hook: ",
    "gemini": "Tool execution blocked: ",
    "copilot": "Denied by preToolUse hook: ",
}
# How the host's own output reports an MCP call its hook blocked: Codex prints no
# mcp_tool_call item for it at all; Copilot and Gemini count it as a failed call.
REPORTS_BLOCKED_CALL = {"codex": False, "gemini": True, "copilot": True}
# Whether the checkpoint text of a confirmed call reaches the model: Gemini CLI 0.61.0's
# scheduler reads no additionalContext from a BeforeTool hook (docs/hosts.md).
CONTEXT_REACHES_MODEL = {"codex": True, "gemini": False, "copilot": True}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayRig]:
    with GatewayRig.running(tmp_path_factory.mktemp("hooks-rig"), http=False) as started:
        yield started


@pytest.fixture(scope="module")
def service(rig: GatewayRig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The guard service for the rig's ZVM simulator and catalog; its ``unix:`` URL."""
    with guard_service(rig.box, tmp_path_factory.mktemp("svc")) as url:
        yield url


Hooked = HostSession  # a host with mcvsphere wired directly and the zerto-rewind hook


@pytest.fixture(scope="module", params=sorted(HOSTS))
def hooked(
    request: pytest.FixtureRequest,
    rig: GatewayRig,
    service: str,
    scripted_models: FakeModels,
    tmp_path_factory: pytest.TempPathFactory,
) -> Hooked:
    host, model = HOSTS[str(request.param)], scripted_models
    host_path(host)
    home = HostHome(host, tmp_path_factory.mktemp(f"hook-{host.name}"))
    host.prepare(home, model.url)
    home.add_server(SERVER, mcvsphere_command(), rig.vcenter.mcvsphere_env(), model_url=model.url)
    assert home.entry(SERVER)["command"] == mcvsphere_command()[0]  # direct, no gateway
    if host.name == "codex":
        # mcvsphere lists its tools about a second after it starts: a Codex entry that is
        # not required is dropped from the first model request (docs/hosts.md).
        home.edit_entry(SERVER, lambda entry: entry.update(required=True))
    home.install_hook(service, "--protect", rig.box.config_path, *INSTALL_FLAGS[host.name])
    return Hooked(host, home, rig, model, flags=RUN_FLAGS[host.name])


def test_confirmed_change_runs_on_one_tag(hooked: Hooked) -> None:
    """The service tags the VM's VPG and the landed checkpoint lets the direct call run."""
    hooked.rig.power_on(VM.confirmed)
    tags_before = hooked.rig.tag_requests(CONFIRMED_VPG)

    run = hooked.run([call(hooked.tool("power_off"), name=VM.confirmed)])

    assert hooked.rig.power_states()[VM.confirmed] == "poweredOff"
    assert hooked.rig.tag_requests(CONFIRMED_VPG) == tags_before + 1
    record = only(hooked.decisions())
    assert (record["row"], record["decision"], record["vms"]) == (
        "confirmed",
        "context",
        [VM.confirmed],
    )
    [cp] = record["checkpoint_ids"]
    tag, landed = hooked.rig.tagged_checkpoints(CONFIRMED_VPG)[cp]
    assert record["tags"] == [tag]
    assert landed <= parse_time(record["time"])
    told = only(hooked.model.tool_results())
    assert f"VM '{VM.confirmed}' powered off" in told.text
    assert hooked.model.saw(CHECKPOINT_NOTE) is CONTEXT_REACHES_MODEL[hooked.host.name]
    assert run.host_calls == [(hooked.tool("power_off"), True)]


def test_paused_vpg_is_denied_and_the_vm_stays_on(hooked: Hooked) -> None:
    """No tag can be made: the hook's deny holds in the host's most permissive mode."""
    run = hooked.run([call(hooked.tool("power_off"), name=VM.failed)])

    assert hooked.rig.power_states()[VM.failed] == "poweredOn"
    assert hooked.rig.tag_requests(FAILED_VPG) == 0
    record = only(hooked.decisions())
    assert (record["row"], record["decision"]) == ("failed", "deny")
    told = only(hooked.model.tool_results())
    assert BLOCKED[hooked.host.name] in told.text
    assert "paused" in told.text
    reported = [(hooked.tool("power_off"), False)] if REPORTS_BLOCKED_CALL[hooked.host.name] else []
    assert run.host_calls == reported


def test_unknown_vm_is_denied_without_a_human(hooked: Hooked) -> None:
    """A VM in no VPG is a prompt; unattended, each hook turns it into a deny."""
    run = hooked.run([call(hooked.tool("power_off"), name=VM.unknown)])

    assert hooked.rig.power_states()[VM.unknown] == "poweredOn"
    record = only(hooked.decisions())
    assert (record["row"], record["decision"]) == ("vm_unknown", "prompt")
    told = only(hooked.model.tool_results())
    assert BLOCKED[hooked.host.name] in told.text
    assert f"no VPG protects {VM.unknown}" in told.text
    reported = [(hooked.tool("power_off"), False)] if REPORTS_BLOCKED_CALL[hooked.host.name] else []
    assert run.host_calls == reported


def test_read_only_call_runs_without_a_tag(hooked: Hooked) -> None:
    tags_before = hooked.rig.box.tag_requests()

    run = hooked.run([call(hooked.tool("get_vm_info"), name=VM.spare)])

    assert hooked.rig.box.tag_requests() == tags_before
    told = only(hooked.model.tool_results())
    assert VM.spare in told.text
    assert run.host_calls == [(hooked.tool("get_vm_info"), True)]


def test_list_vms_without_the_gateway(hooked: Hooked) -> None:
    """mcvsphere straight to the host: Gemini CLI rejects list_vms' array structuredContent
    here too, so that is Gemini's doing, not the gateway's."""
    list_vms_reaches_the_model(hooked)


def _write_calls(host: str, config: Path, project: Path) -> list[tuple[Any, Path, str]]:
    """The host's own ways to overwrite a protected file: (call, the file, what the model
    is told first). Codex's ``exec`` offers the model no file tool, only its shell."""
    shell = f"echo '{{}}' > {config}"
    if host == "codex":
        return [(call("exec_command", cmd=shell), config, "Command blocked by PreToolUse hook: ")]
    blocked = BLOCKED[host]
    if host == "gemini":
        # Gemini's file tools stay inside the workspace: its own settings file there is
        # the hook's file, protected like the guard's config.
        settings = project / ".gemini" / "settings.json"
        return [
            (call("run_shell_command", command=shell), config, blocked),
            (call("write_file", file_path=str(settings), content="{}"), settings, blocked),
        ]
    return [
        (call("bash", command=shell, description="reset"), config, blocked),
        (call("create", path=str(config), file_text="{}"), config, blocked),
    ]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_writes_to_the_guard_files_are_denied(hooked: Hooked) -> None:
    """The guard's config (``--protect``) and the hook's own files cannot be overwritten
    through the host's shell or file tools: the hook refuses, naming the file."""
    project_settings = hooked.home.project / ".gemini" / "settings.json"
    write_json(project_settings, {"context": {"fileName": "GEMINI.md"}})
    attempts = _write_calls(hooked.host.name, Path(hooked.rig.box.config_path),
                            hooked.home.project)  # fmt: skip
    before = {path: _digest(path) for _call, path, _told in attempts}

    hooked.run([[c] for c, _path, _told in attempts])

    assert {path: _digest(path) for path in before} == before
    results = hooked.model.tool_results()
    assert len(results) == len(attempts), results
    for (_call, path, blocked), told in zip(attempts, results, strict=True):
        assert told.text.startswith(blocked), told
        assert str(path) in told.text, told
        assert "the call was not run" in told.text
