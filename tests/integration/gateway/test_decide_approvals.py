"""``guard.prompt_via: approvals`` on the decide socket: the thin hooks' prompt rows.

The hook's call becomes an approval request whose principal is the hook's unix user as
the kernel reports it on the decide socket; the hook is denied with the request's id, a
person approves on the approvals socket, and the retry of the same call passes once.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.service import guard_service
from support.users import as_user
from zerto_rewind.service_client import request_json
from zerto_rewind.testing import Sandbox

APPROVER = "zr-decide-olivia"


@pytest.fixture(scope="module")
def approver() -> Iterator[str]:
    assert os.geteuid() == 0, "this test creates a user: run it as root (CI does)"
    try:
        pwd.getpwnam(APPROVER)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", APPROVER], check=True
        )
    try:
        yield APPROVER
    finally:
        subprocess.run(["userdel", APPROVER], check=False)


@pytest.fixture
def service(box: Sandbox, approver: str) -> Iterator[tuple[str, str]]:
    """`gateway --socket` with prompt_via approvals and an approvals socket others reach."""
    run = Path(tempfile.mkdtemp(prefix="zr-decide-"))
    run.chmod(0o755)
    box.write_config(
        state_dir=box.state_dir,
        log=box.log_path,
        guard={"timeout_s": 10, "prompt_via": "approvals"},
        approvals={"approvers": {"users": [approver]}},
    )
    approvals = run / "approvals.sock"
    try:
        with guard_service(
            box, run, "--approvals-socket", str(approvals), write_config=False
        ) as url:
            yield url, f"unix:{approvals}"
    finally:
        shutil.rmtree(run, ignore_errors=True)


def decide(url: str, tool: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps({"tool_name": tool, "tool_input": tool_input, "session_id": "s1"})
    opts = {"service": url, "service_user": "root"}
    return request_json(opts, "POST", "/v1/decide", body.encode(), timeout_s=15)


def approvals(user: str, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return as_user(user, [sys.executable, "-m", "zerto_rewind", "approvals", "--service", url,
                          *args])  # fmt: skip


def test_a_hooks_prompt_waits_for_an_approver_and_its_retry_passes_once(
    service: tuple[str, str], box: Sandbox, approver: str
) -> None:
    decide_url, approvals_url = service
    call = ("mcp__vsphere__power_off_vm", {"name": "no-such-vm"})
    first = decide(decide_url, *call)
    assert first["outcome"] == "deny"
    listed = approvals(approver, approvals_url, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (request,) = json.loads(listed.stdout)
    assert request["principal"] == "unix:root"  # the kernel's word, not the hook's
    assert f"request {request['id']} is waiting" in first["reason"]
    # Before the approval, a retry is still denied and joins the same request.
    assert decide(decide_url, *call)["outcome"] == "deny"
    assert len(json.loads(approvals(approver, approvals_url, "list", "--json").stdout)) == 1
    approved = approvals(approver, approvals_url, "approve", request["id"])
    assert approved.returncode == 0, approved.stderr
    passed = decide(decide_url, *call)
    assert passed["outcome"] == "context"
    assert f"unix:{approver} approved this call" in passed["context"]
    # Once: the next identical call needs a new approval; another call was never covered.
    assert decide(decide_url, *call)["outcome"] == "deny"
    assert decide(decide_url, call[0], {"name": "other-vm"})["outcome"] == "deny"
    lines = [json.loads(x) for x in Path(box.log_path).read_text().splitlines()]
    named = [x for x in lines if x.get("approval_id") == request["id"]]
    events = [x["answer"] for x in named if x["origin"] == "approvals"]
    assert events == ["requested", "approved", "used"]
    # The call's own lines name the request too, as the gateway's do.
    calls = [x["answer"] for x in named if x["origin"] == "service"]
    assert calls == ["waiting", "waiting", "approved"]


def test_the_requesting_user_cannot_approve_its_own_call(
    service: tuple[str, str], box: Sandbox
) -> None:
    """root made the request on the decide socket: root is not an approver here, and even
    listed it could not approve its own request (tests/unit/gateway/test_calls_approvals)."""
    decide_url, approvals_url = service
    decide(decide_url, "mcp__vsphere__mystery_tool", {"name": "jp-ubuntu"})
    refused = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "approvals", "--service", approvals_url, "list"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode == 1
    assert "is not an approver" in refused.stderr
