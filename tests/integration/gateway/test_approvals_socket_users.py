"""The approvals socket decides by the kernel's word on who connected (SO_PEERCRED).

Real users made with useradd: the agent's user (listed in approvals.agent_users) and a
user nobody listed can read nothing and approve nothing; the approver can. The socket
lives in a 0755 directory, mode 0666, so every user really reaches it: a refusal is the
service's, not the file system's.
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    actions,
    client,
    decisions,
    gateway_config,
    gateway_process,
)
from support.users import as_user, reachable_dir
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

AGENT, APPROVER, STRANGER = "zr-appr-agent", "zr-appr-olivia", "zr-appr-nobody"


@pytest.fixture(scope="module")
def users() -> Iterator[None]:
    assert os.geteuid() == 0, "these tests create users: run them as root (CI does)"
    for name in (AGENT, APPROVER, STRANGER):
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(
                ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True
            )
    try:
        yield
    finally:
        for name in (AGENT, APPROVER, STRANGER):
            subprocess.run(["userdel", name], check=False)


@pytest.fixture
def open_dir() -> Iterator[Path]:
    with reachable_dir("zr-approvals-") as path:
        yield path


@pytest.fixture
def gw(
    users: None, box: Sandbox, tmp_path: Path, actions_log: Path, open_dir: Path
) -> Iterator[tuple[GatewayProcess, str]]:
    sock = str(open_dir / "approvals.sock")
    gateway_config(
        box,
        actions_log,
        approvals={
            "approvers": {"users": [APPROVER, AGENT]},  # listed by mistake: still refused
            "agent_users": [],
            "wait_s": 0.5,
        },
    )
    # agent_users and approvers may not overlap in one config (the parser refuses it), so
    # the agent is refused by the group rule's twin: listed as an agent, not as approver.
    config = json.loads(Path(box.config_path).read_text())
    config["approvals"]["approvers"]["users"] = [APPROVER]
    config["approvals"]["agent_users"] = [AGENT]
    Path(box.config_path).write_text(json.dumps(config))
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as process:
        yield process, sock


def cli(user: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``zerto-rewind approvals ARGS`` as ``user`` (this checkout's Python made reachable)."""
    return as_user(user, [sys.executable, "-m", "zerto_rewind", "approvals", *args])


async def test_only_the_approver_may_list_or_approve(
    gw: tuple[GatewayProcess, str], box: Sandbox, actions_log: Path
) -> None:
    process, sock = gw
    async with client(process.endpoint(), TOKENS["agent-a"]) as c:
        await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    listed = cli(APPROVER, "--service", f"unix:{sock}", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (request,) = json.loads(listed.stdout)
    for who, why in ((AGENT, "agents cannot approve"), (STRANGER, "is not an approver")):
        for action in (["list"], ["approve", request["id"]]):
            refused = cli(who, "--service", f"unix:{sock}", *action)
            assert refused.returncode == 1
            assert why in refused.stderr, refused.stderr
    shown = cli(APPROVER, "--service", f"unix:{sock}", "show", request["id"], "--json")
    assert json.loads(shown.stdout)["state"] == "pending"
    approved = cli(APPROVER, "--service", f"unix:{sock}", "approve", request["id"])
    assert approved.returncode == 0, approved.stderr
    async with client(process.endpoint(), TOKENS["agent-a"]) as c:
        result = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert not result.is_error
    assert [a["tool"] for a in actions(actions_log)] == ["mystery_tool"]
    answers = [(d["answer"], d.get("approver")) for d in decisions(box)]
    assert ("refused", f"unix:{AGENT}") not in answers  # refused before a request is read
    assert ("approved", f"unix:{APPROVER}") in answers
