"""The guard's ``ask`` in an interactive Claude Code session under ``bypassPermissions``.

The real CLI runs in a private tmux server (``tmux -L``), driven with ``send-keys`` and read
with ``capture-pane``; every wait is bounded. The HOME from ``harness.make_home`` already
answers onboarding, the bypass-mode warning, folder trust and the "use this API key?"
question, so the first screen is the session itself.

Finding (2.1.328): a hook's ``ask`` is *not* auto-approved by ``bypassPermissions`` (the old
bug anthropics/claude-code#77212): the CLI shows "Hook PreToolUse:<tool> requires
confirmation for this tool: <our reason>" and "Do you want to proceed?", and the MCP tool
does not run until a human says Yes. So the guard's rule — *prompt* maps to ``ask`` on
Claude Code, because a headless ``-p`` run turns it into a denial and an interactive one puts
it to a human, whatever the permission mode — matches what the host does.
"""

from __future__ import annotations

import shlex
import shutil
import time
import uuid
from collections.abc import Iterator

import pytest

from e2e.fake_anthropic import call, delayed
from e2e.guarded import Guarded
from e2e.harness import claude_env, mcp_tool
from e2e.tmux import Tmux

POWER_OFF = mcp_tool("power_off_vm")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        raise AssertionError("tmux is needed for the interactive e2e test (apt-get install tmux)")
    session = Tmux(socket=f"zr-e2e-{uuid.uuid4().hex[:8]}")
    try:
        yield session
    finally:
        session.kill()


def test_ask_under_bypass_permissions_waits_for_a_human(guarded: Guarded, tmux: Tmux) -> None:
    """Interactive, bypassPermissions: the guard's ``ask`` is a prompt; the tool waits for Yes."""
    e2e = guarded.e2e
    # the first answer is held back 2 s so that the session's footer can be read first
    first = delayed([call(POWER_OFF, name="web-01")], lambda _messages: time.time() + 2.0)
    e2e.script([first, "powered off without a rewind point"])
    env = claude_env(e2e.api.url, e2e.home, guarded.hook_env())
    env["TERM"] = "xterm-256color"
    argv = [
        str(e2e.claude),
        "--permission-mode",
        "bypassPermissions",
        "--mcp-config",
        str(e2e.mcp_config),
        "--strict-mcp-config",
        "Power off web-01.",
    ]
    tmux.start(f"exec env -i {shlex.join(f'{k}={v}' for k, v in env.items())} {shlex.join(argv)}",
               str(e2e.project_dir))  # fmt: skip

    tmux.wait_for(lambda s: "bypass permissions on" in s, "the bypass-mode footer")
    screen = tmux.wait_for(lambda s: "Do you want to proceed?" in s, "the confirmation prompt")

    assert f"Hook PreToolUse:{POWER_OFF} requires confirmation for this tool:" in screen
    assert "no VPG protects web-01" in " ".join(screen.split())
    assert "1. Yes" in screen
    assert "No" in screen
    # the hook has decided (prompt, logged); the tool has not run, and does not while we wait
    assert guarded.rows() == [("vm_unknown", "prompt")]
    time.sleep(1.0)
    assert guarded.vm_actions() == []

    tmux.keys("Enter")  # "1. Yes" is selected

    tmux.wait_for(lambda s: "powered off without a rewind point" in s, "the final answer")
    assert guarded.vm_actions() == [("web-01", "power_off_vm")]
    assert guarded.rows() == [("vm_unknown", "prompt")]  # no second hook run
    [result] = e2e.api.tool_results()
    assert not result.is_error
    assert "web-01 powered off" in result.text
