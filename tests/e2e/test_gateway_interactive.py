"""The gateway's prompt rows as MCP elicitation in an interactive Claude Code session (tmux).

Finding (2.1.328): Claude Code supports MCP elicitation. It speaks the 2026-07-28 revision
(a ``server/discover`` probe, then client capabilities in every request's ``_meta``:
``"elicitation": {"form": {}, "url": {}}``), so the gateway asks by returning an
InputRequiredResult; the CLI shows the form ("MCP server “vsphere” requests your input", the
gateway's reason and question, a "Run it without a checkpoint" checkbox, Accept / Decline)
and retries the call with the answer. Headless (``-p``) it answers ``cancel`` without asking
anyone (see test_gateway_rows.py). The form counts only on a single-user stdio gateway with
``approvals.trust_client_answers``: elsewhere the agent could answer it itself.

No hook is installed: the question comes from the gateway, the only vSphere server, whose
upstream is mcvsphere against vcsim; what happened is read back from the vCenter.
"""

from __future__ import annotations

import shlex
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.fake_anthropic import call, delayed
from e2e.gateway_e2e import UNLISTED_TOOL, VM, GatewayRig, tool
from e2e.harness import E2ESession, claude_env
from e2e.tmux import Tmux

# The form is the client's own answer: it counts only with approvals.trust_client_answers,
# which the gateway allows on stdio for a single user (never on HTTP with tokens; there a
# person approves on the approvals socket or page: tests/e2e/test_gateway_approvals.py).
TRANSPORTS = ["stdio"]
POWER_OFF = tool("power_off")
SUSPEND = tool(UNLISTED_TOOL)
FORM_TITLE = "MCP server “vsphere” requests your input"
WAIT_S = 45.0
KEY_PAUSE_S = 1.0


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayRig]:
    """One vcsim, one ZVM simulator, one HTTP gateway; stdio runs start gateways of their own."""
    with GatewayRig.running(tmp_path_factory.mktemp("gateway-interactive"), http=False) as started:
        started.write_config(approvals={"trust_client_answers": True})
        yield started


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        raise AssertionError("tmux is needed for the interactive e2e test (apt-get install tmux)")
    session = Tmux(socket=f"zr-gw-e2e-{uuid.uuid4().hex[:8]}")
    try:
        yield session
    finally:
        session.kill()


def start_claude(
    tmux: Tmux, rig: GatewayRig, e2e: E2ESession, tmp: Path, transport: str, prompt: str
) -> None:
    """The interactive CLI under bypassPermissions, its only MCP server the gateway."""
    mcp = rig.mcp_config(tmp / "gateway-mcp.json", transport)
    env = claude_env(e2e.api.url, e2e.home)
    env["TERM"] = "xterm-256color"
    argv = [str(e2e.claude), "--permission-mode", "bypassPermissions", "--mcp-config", str(mcp),
            "--strict-mcp-config", prompt]  # fmt: skip
    command = f"exec env -i {shlex.join(f'{k}={v}' for k, v in env.items())} {shlex.join(argv)}"
    tmux.start(command, str(e2e.project_dir))


def press(tmux: Tmux, key: str) -> None:
    """One key, after a pause: 2.1.328's dialogs ignore keys for a moment after they change."""
    time.sleep(KEY_PAUSE_S)
    tmux.keys(key)


def flat(screen: str) -> str:
    return " ".join(screen.split())


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_approve_runs_the_call(
    rig: GatewayRig, e2e: E2ESession, tmux: Tmux, tmp_path: Path, transport: str
) -> None:
    """VM unknown to Zerto: the CLI shows the gateway's question; tick + Accept → it runs."""
    rig.power_on(VM.unknown)
    log_start = len(rig.log())
    # held back 2 s so that the session is up before the call
    first = delayed([call(POWER_OFF, name=VM.unknown)], lambda _messages: time.time() + 2.0)
    e2e.script([first, "powered off without a rewind point"])
    start_claude(tmux, rig, e2e, tmp_path, transport, "Power off the VM.")

    screen = tmux.wait_for(lambda s: FORM_TITLE in s, "the gateway's question", WAIT_S)

    assert f"no VPG protects {VM.unknown}" in flat(screen)
    assert f"Run {POWER_OFF} with no Zerto checkpoint in front of it?" in flat(screen)
    assert "Run it without a checkpoint" in screen
    time.sleep(1.0)  # while the question is open, nothing has run
    assert rig.power_states()[VM.unknown] == "poweredOn"

    press(tmux, "Space")  # tick "Run it without a checkpoint"
    tmux.wait_for(lambda s: "☒" in s, "the ticked checkbox")
    press(tmux, "Down")
    tmux.wait_for(lambda s: "❯ Accept" in s, "Accept selected")
    press(tmux, "Enter")

    tmux.wait_for(lambda s: "powered off without a rewind point" in s, "the final answer", WAIT_S)
    assert rig.power_states()[VM.unknown] == "poweredOff"
    asked, record = rig.log()[log_start:]  # logged when asked, then with the answer
    assert asked["answer"] == "asked"
    assert (record["row"], record["decision"], record["answer"]) == (
        "vm_unknown",
        "prompt",
        "approved",
    )
    [result] = e2e.api.tool_results()
    assert not result.is_error
    assert f"VM '{VM.unknown}' powered off" in result.text


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_decline_does_not_run_the_call(
    rig: GatewayRig, e2e: E2ESession, tmux: Tmux, tmp_path: Path, transport: str
) -> None:
    """A tool missing from the catalog: the CLI shows the question; Decline → it never runs."""
    rig.power_on(VM.unlisted)
    log_start = len(rig.log())
    first = delayed([call(SUSPEND, name=VM.unlisted)], lambda _messages: time.time() + 2.0)
    e2e.script([first, "left it alone"])
    start_claude(tmux, rig, e2e, tmp_path, transport, "Suspend the VM.")

    screen = tmux.wait_for(lambda s: FORM_TITLE in s, "the gateway's question", WAIT_S)

    assert "is not in the zerto-rewind catalog" in flat(screen)
    assert f"Run {SUSPEND} with no Zerto checkpoint in front of it?" in flat(screen)

    press(tmux, "Down")
    tmux.wait_for(lambda s: "❯ Accept" in s, "Accept selected")
    press(tmux, "Right")
    tmux.wait_for(lambda s: "❯ Decline" in s, "Decline selected")
    press(tmux, "Enter")

    tmux.wait_for(lambda s: "left it alone" in s, "the final answer", WAIT_S)
    assert rig.power_states()[VM.unlisted] == "poweredOn"  # not suspended
    asked, record = rig.log()[log_start:]  # logged when asked, then with the answer
    assert asked["answer"] == "asked"
    assert (record["row"], record["decision"], record["answer"]) == (
        "unlisted",
        "prompt",
        "declined",
    )
    [result] = e2e.api.tool_results()
    assert result.is_error
    assert "declined" in result.text
