"""A read-only-looking tool that writes the gateway host's files waits for a person.

The real gateway process runs a stand-in upstream (host_path_server.py) whose
``download_from_datastore`` is marked read-only and writes ``save_to`` on its own
host. Classified from the live tools/list (catalog.from_annotations) or by an
explicit ``host_paths`` entry, a call with ``save_to`` waits for an approval; the
approver sees the path in the request; nothing is written before the approval; the
decision log and the gateway's stderr never carry the path. A call without
``save_to`` runs at once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
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
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

SERVER = Path(__file__).resolve().parent / "host_path_server.py"
TOOL = "mcp__vsphere__download_from_datastore"


def configure(box: Sandbox, actions_log: Path, how: str) -> None:
    upstream = {
        "command": [sys.executable, str(SERVER)],
        "env": {"E2E_VM_ACTIONS_LOG": str(actions_log), "PYTHONDONTWRITEBYTECODE": "1"},
        "timeout_s": 10,
    }
    catalog: dict[str, Any] = {"read_only_tools": [], "tools": {}}
    if how == "from_annotations":
        catalog["catalog"] = {"from_annotations": True}
    else:  # the kept mcvsphere catalog's entry
        catalog["tools"] = {TOOL: {"host_paths": ["save_to"], "decision": "allow"}}
    gateway_config(
        box,
        upstream=upstream,
        approvals={"approvers": {"users": ["root"]}, "wait_s": 30},
        **catalog,
    )


def pending(sock: str) -> list[dict[str, Any]]:
    listed = approvals_cli("--service", f"unix:{sock}", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    result: list[dict[str, Any]] = json.loads(listed.stdout)
    return result


@pytest.mark.parametrize("how", ["from_annotations", "explicit"])
async def test_a_call_that_writes_the_host_waits_for_approval(
    box: Sandbox, tmp_path: Path, actions_log: Path, how: str
) -> None:
    configure(box, actions_log, how)
    target = tmp_path / "guard-owned" / "decisions.log"
    target.parent.mkdir()
    sock = str(tmp_path / "approvals.sock")
    with gateway_process(box, tmp_path, extra_args=("--approvals-socket", sock)) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            plain = await c.call_tool(
                "download_from_datastore", {"datastore": "ds1", "path": "iso/readme.txt"}
            )
            assert not plain.is_error, text_of(plain)
            results: list[Any] = []
            async with anyio.create_task_group() as tg:

                async def the_call() -> None:
                    arguments = {"datastore": "ds1", "path": "x.iso", "save_to": str(target)}
                    results.append(await c.call_tool("download_from_datastore", arguments))

                tg.start_soon(the_call)
                with anyio.fail_after(20):
                    while not (waiting := await anyio.to_thread.run_sync(pending, sock)):
                        await anyio.sleep(0.1)
                (request,) = waiting
                assert (request["tool"], request["row"]) == (TOOL, "host_path")
                shown = approvals_cli("--service", f"unix:{sock}", "show", request["id"])
                assert shown.returncode == 0, shown.stderr
                assert f'argument  save_to = "{target}"' in shown.stdout
                assert "argument save_to" in shown.stdout  # the why names it
                assert not target.exists(), "the file was written before anyone approved"
                assert len(actions(actions_log)) == 1  # only the call without save_to
                approved = await anyio.to_thread.run_sync(
                    lambda: approvals_cli("--service", f"unix:{sock}", "approve", request["id"])
                )
                assert approved.returncode == 0, approved.stderr
        stderr = gw.stderr.read_text()
    (result,) = results
    assert not result.is_error, text_of(result)
    assert target.read_text() == "contents of [ds1] x.iso\n"
    assert [a["arguments"]["save_to"] for a in actions(actions_log)] == [None, str(target)]
    lines = [d for d in decisions(box) if d.get("tool") == TOOL]
    host_rows = [d for d in lines if d.get("row") == "host_path"]
    assert host_rows
    assert host_rows[-1]["answer"] == "approved"
    assert "save_to" in host_rows[-1]["reason"]
    log_text = Path(box.log_path).read_text()
    for text in (log_text, stderr):
        assert str(target) not in text
        assert "guard-owned" not in text
