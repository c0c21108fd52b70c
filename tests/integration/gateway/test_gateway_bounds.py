"""Issue 26's bounds, through a real gateway process: a capped queue, a page no agent can
lock an approver out of, and client answers never trusted where agents connect.

- ``approvals.max_open_per_principal``: past it, an agent's new call is refused at once,
  naming the cap; the refusal is logged without argument values; another agent and
  the approver's socket are unaffected.
- the approvals page over real HTTP: an agent's wrong passwords for the approver's name
  slow that name from loopback, but the approver's right password gets in within
  seconds, at once from a browser that logged in before; the approver sees the failures
  on the page and in the webhook's ``login_failed`` event.
- ``approvals.trust_client_answers`` with ``gateway --socket`` that other users can reach
  (mode, or a group with an agent's user in it): the gateway does not start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    actions,
    approvals_cli,
    client,
    decisions,
    gateway_config,
    gateway_process,
    text_of,
)
from support.users import unix_user
from support.webhook_receiver import SECRET, Receiver
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

PASSWORD = "correct horse battery"


async def test_past_the_cap_a_call_is_refused_at_once_and_logged(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    sock = str(tmp_path / "approvals.sock")
    gateway_config(
        box,
        actions_log,
        approvals={"approvers": {"users": ["root"]}, "wait_s": 0.3, "max_open_per_principal": 2},
    )
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as a:
            for n in range(2):
                waiting = await a.call_tool("mystery_tool", {"name": f"scratch-{n}"})
                assert waiting.is_error
                assert "is waiting for an approver" in text_of(waiting)
            started = time.monotonic()
            capped = await a.call_tool("mystery_tool", {"name": "value-past-the-cap"})
            took = time.monotonic() - started
        async with client(gw.endpoint(), TOKENS["agent-b"]) as b:
            other = await b.call_tool("mystery_tool", {"name": "scratch-b"})
        listed = approvals_cli("--service", f"unix:{sock}", "list", "--json")
    text = text_of(capped)
    assert capped.is_error
    assert took < 0.3, "refused at once, without waiting for an approver"
    assert "agent-a already has 2 open approval requests" in text
    assert "approvals.max_open_per_principal: 2" in text
    assert "zerto-rewind approvals list" in text
    assert "is waiting for an approver" in text_of(other)  # another principal: its own cap
    assert actions(actions_log) == []
    pending = json.loads(listed.stdout)
    assert sorted(r["principal"] for r in pending) == ["agent-a", "agent-a", "agent-b"]
    (line,) = [d for d in decisions(box) if d.get("answer") == "capped"]
    assert line["client"] == "agent-a"
    assert "approvals.max_open_per_principal: 2" in line["reason"]
    assert "value-past-the-cap" not in json.dumps(line)


async def test_the_approver_gets_in_despite_an_agents_wrong_passwords(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    with Receiver() as hook:
        gateway_config(
            box,
            actions_log,
            approvals={
                "approvers": {"users": ["root"]},
                "web_approvers": {"olivia": hash_password(PASSWORD)},
                "notify": {"url": hook.url, "secret_env": "ZR_TEST_WEBHOOK_SECRET"},
            },
        )
        with gateway_process(
            box,
            tmp_path,
            extra_args=("--approvals-listen", "127.0.0.1:0"),
            env=box.env(ZR_TEST_WEBHOOK_SECRET=SECRET),
        ) as gw:
            assert gw.info is not None
            page = gw.info["approvals_url"]
            login = f"{page}/login"
            with (
                httpx.Client(follow_redirects=False, timeout=60) as agent,
                httpx.Client(
                    follow_redirects=False,
                    timeout=60,
                    transport=httpx.HTTPTransport(local_address="127.0.0.2"),
                ) as approver,
            ):
                # The agent guesses from 127.0.0.1; every loopback address is one source.
                for n in range(7):
                    guess = agent.post(login, data={"name": "olivia", "password": f"guess-{n}"})
                    assert guess.status_code == 401
                started = time.monotonic()
                first = approver.post(login, data={"name": "olivia", "password": PASSWORD})
                waited = time.monotonic() - started
                assert first.status_code == 303, first.text
                assert waited < 10, "the right password gets in within seconds"
                listing = approver.get(f"{page}/").text
                assert "7 failed approver login(s)" in listing
                assert "loopback" in listing
                # The agent goes on; the approver's browser, known now, is not held at all.
                for n in range(2):
                    agent.post(login, data={"name": "olivia", "password": f"more-{n}"})
                approver.cookies.delete("zr_session")
                started = time.monotonic()
                again = approver.post(login, data={"name": "olivia", "password": PASSWORD})
                assert again.status_code == 303
                assert time.monotonic() - started < 1.5
        events = [json.loads(p["body"]) for p in hook.posts]
    failed = [e for e in events if e["event"] == "login_failed"]
    assert failed, "the webhook was told of the failed logins"
    assert failed[0]["failures"][0]["name"] == "olivia"
    assert failed[0]["failures"][0]["source"] == "loopback"
    assert not any("guess-" in p["body"].decode() for p in hook.posts)


def trusting_gateway(box: Sandbox, sock: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "gateway", "--socket", str(sock),
         "--socket-mode", mode, "--allow-privileged-upstream",
         "--ready-file", str(sock.parent / "ready.json")],
        env=box.env(), capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip


def test_trusting_client_answers_on_a_socket_anyone_reaches_does_not_start(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    gateway_config(box, actions_log, approvals={"trust_client_answers": True})
    proc = trusting_gateway(box, tmp_path / "gw.sock", "0666")
    assert proc.returncode == 1
    assert "approvals.trust_client_answers" in proc.stderr
    assert "any local user (mode 0666)" in proc.stderr
    assert "could answer its own questions" in proc.stderr
    assert not (tmp_path / "gw.sock").exists()


def test_trusting_client_answers_on_a_socket_an_agents_group_reaches_does_not_start(
    box: Sandbox, actions_log: Path
) -> None:
    """The socket's group (from a setgid directory) is the agent user's: refused at start."""
    with unix_user("zr-agent") as agent:
        run = Path(tempfile.mkdtemp(prefix="zr-trust-"))
        try:
            os.chown(run, 0, agent.pw_gid)
            run.chmod(0o2750)
            gateway_config(
                box,
                actions_log,
                approvals={"trust_client_answers": True, "agent_users": [agent.pw_name]},
            )
            proc = trusting_gateway(box, run / "gw.sock", "0660")
            assert proc.returncode == 1
            assert "approvals.trust_client_answers" in proc.stderr
            assert (
                f"the members of group {agent.pw_name}, {agent.pw_name} (mode 0660)" in proc.stderr
            )
            # Only the service's own user reaches a 0600 socket: it starts.
            ready = run / "ready.json"
            log = run / "ok.stderr"
            with log.open("wb") as err:
                served = subprocess.Popen(
                    [sys.executable, "-m", "zerto_rewind", "gateway", "--socket",
                     str(run / "ok.sock"), "--socket-mode", "0600",
                     "--allow-privileged-upstream", "--ready-file", str(ready)],
                    env=box.env(), stdout=subprocess.DEVNULL, stderr=err,
                )  # fmt: skip
            try:
                deadline = time.monotonic() + 30
                while not ready.exists():
                    assert served.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.05)
            finally:
                served.terminate()
                served.wait(timeout=10)
        finally:
            shutil.rmtree(run, ignore_errors=True)
