"""One waiting call through the real gateway process, and every channel that tells a person.

The gateway listens with an approvals socket, the approvals page and a webhook. A real
SDK client (which declares URL-mode elicitation) calls a prompt-row tool: the webhook
receives a signed ``requested`` event linking to the page; the client is shown the
page's URL for its request (its answer approves nothing); while the call waits it gets
progress notifications; an approver on the socket approves and the call runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    actions,
    approvals_cli,
    client,
    gateway_config,
    gateway_process,
    text_of,
)
from support.webhook_receiver import SECRET, Receiver
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.gateway.notify import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


def requested(posts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The webhook's "requested" posts (the log's anchors are posted to the same URL)."""
    return [p for p in posts if json.loads(p["body"]).get("event") == "requested"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_waiting_call_is_announced_shown_and_approved(
    box: Sandbox, tmp_path: Path, actions_log: Path, mode: str
) -> None:
    sock = str(tmp_path / "approvals.sock")
    with Receiver() as hook:
        gateway_config(
            box,
            actions_log,
            approvals={
                "approvers": {"users": ["root"]},
                "web_approvers": {"olivia": hash_password("correct horse battery")},
                "wait_s": 30,
                "notify": {"url": hook.url, "secret_env": "ZR_TEST_WEBHOOK_SECRET"},
            },
        )
        with gateway_process(
            box,
            tmp_path,
            extra_args=("--approvals-socket", sock, "--approvals-listen", "127.0.0.1:0"),
            env=box.env(ZR_TEST_WEBHOOK_SECRET=SECRET),
        ) as gw:
            page = gw.info["approvals_url"] if gw.info else None
            assert page is not None
            assert page.startswith("http://127.0.0.1:")
            shown: list[str] = []
            progress: list[float] = []

            async def elicit(context: Any, params: Any) -> types.ElicitResult:
                shown.append(getattr(params, "url", "") or "")
                return types.ElicitResult(action="accept")

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append(done)

            async with client(
                gw.endpoint(), TOKENS["agent-a"], elicitation_callback=elicit, mode=mode
            ) as c:
                results: list[Any] = []
                async with anyio.create_task_group() as tg:

                    async def the_call() -> None:
                        results.append(
                            await c.call_tool(
                                "mystery_tool",
                                {"name": "jp-ubuntu"},
                                progress_callback=on_progress,
                            )
                        )

                    tg.start_soon(the_call)
                    with anyio.fail_after(20):
                        while not requested(hook.posts):
                            await anyio.sleep(0.05)
                    await anyio.sleep(6)  # past the first progress tick (5 s)
                    post = requested(hook.posts)[0]
                    event = json.loads(post["body"])
                    request_id = event["request"]["id"]
                    approved = await anyio.to_thread.run_sync(
                        lambda: approvals_cli("--service", f"unix:{sock}", "approve", request_id)
                    )
                    assert approved.returncode == 0, approved.stderr
    (result,) = results
    assert not result.is_error, text_of(result)
    assert [a["tool"] for a in actions(actions_log)] == ["mystery_tool"]
    headers = {k.lower(): v for k, v in post["headers"].items()}
    assert verify_signature(
        SECRET, headers[TIMESTAMP_HEADER.lower()], post["body"], headers[SIGNATURE_HEADER.lower()]
    )
    assert event["event"] == "requested"
    assert event["url"] == f"{page}/requests/{request_id}"
    assert shown == [f"{page}/requests/{request_id}"]
    if mode == "legacy":  # the SDK's 2026-07-28 client has no progress stream for inline retries
        assert progress, "no progress notification while the call waited"
