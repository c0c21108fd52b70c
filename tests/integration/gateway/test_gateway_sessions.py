"""Handshake-era sessions are bound to the token that opened them.

A second client that learns another's ``Mcp-Session-Id`` gets 404 for it, as if it
did not exist: it can neither list, call, answer the first client's elicitation,
nor end the session. Raw ``httpx2`` plays the hostile client; the SDK's own client
(``mode="legacy"``) the honest one.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    StartGateway,
    actions,
    decisions,
    text_of,
)
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio

NOT_FOUND = {"error": "session not found"}


@pytest.fixture
def gw(start_gateway: StartGateway) -> GatewayProcess:
    # Prompt rows wait for an approver; meanwhile the client is shown the approvals
    # page by a URL-mode elicitation over its session: a question pending in it.
    approvals = {
        "approvers": {"users": ["approver"]},
        "page_url": "https://approvals.example",
        "wait_s": 3,
    }
    return start_gateway(approvals=approvals)


def _headers(token: str, session: str | None = None) -> dict[str, str]:
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION,
    }
    if session is not None:
        headers["Mcp-Session-Id"] = session
    return headers


def _request(method: str, request_id: int, params: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def _message(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether plain JSON or one SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return dict(response.json())
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return dict(json.loads(line[5:]))
    raise AssertionError(f"no message in {response.text!r}")


async def _open_session(http: httpx2.AsyncClient, url: str, token: str) -> str:
    """initialize by hand (the handshake era) and return the Mcp-Session-Id it issued."""
    params = {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    response = await http.post(url, json=_request("initialize", 1, params), headers=_headers(token))
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    done = await http.post(url, json=initialized, headers=_headers(token, session))
    assert done.status_code == 202, done.text
    return session


async def _list(http: httpx2.AsyncClient, url: str, token: str, session: str) -> httpx2.Response:
    return await http.post(url, json=_request("tools/list", 2), headers=_headers(token, session))


def _refused(response: httpx2.Response) -> bool:
    return response.status_code == 404 and response.json() == NOT_FOUND


async def test_another_token_cannot_use_a_session(
    gw: GatewayProcess, box: Sandbox, actions_log: Path
) -> None:
    """agent-b with agent-a's session id: 404 for list and call, nothing reaches the upstream."""
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await _open_session(http, url, TOKENS["agent-a"])
        listed = await _list(http, url, TOKENS["agent-b"], session)
        assert _refused(listed), listed.text
        call = _request(
            "tools/call", 3, {"name": "power_off_vm", "arguments": {"name": "jp-ubuntu"}}
        )
        called = await http.post(url, json=call, headers=_headers(TOKENS["agent-b"], session))
        assert _refused(called), called.text
        # nor may it listen on the session's stream of server-to-client messages
        stream = await http.get(url, headers=_headers(TOKENS["agent-b"], session))
        assert _refused(stream), stream.text
        # the owner is not disturbed by the attempt
        own = await _list(http, url, TOKENS["agent-a"], session)
        assert own.status_code == 200, own.text
        names = {tool["name"] for tool in _message(own)["result"]["tools"]}
        assert "power_off_vm" in names
        # two session headers are not a way around the binding
        twice = await http.post(
            url,
            json=_request("tools/list", 4),
            headers=[
                *_headers(TOKENS["agent-b"], session).items(),
                ("Mcp-Session-Id", "0" * 32),
            ],
        )
        assert twice.status_code == 400, twice.text
    assert actions(actions_log) == []
    assert decisions(box) == []
    stderr = gw.stderr.read_text()
    assert "refused agent-b a session opened by agent-a" in stderr
    assert all(token not in stderr for token in TOKENS.values())


async def test_only_the_owner_ends_a_session(gw: GatewayProcess) -> None:
    """A DELETE by agent-b is refused and the session lives on; agent-a's DELETE ends it."""
    url = gw.endpoint()
    async with httpx2.AsyncClient(timeout=30) as http:
        session = await _open_session(http, url, TOKENS["agent-a"])
        hostile = await http.delete(url, headers=_headers(TOKENS["agent-b"], session))
        assert _refused(hostile), hostile.text
        still = await _list(http, url, TOKENS["agent-a"], session)
        assert still.status_code == 200, still.text
        ended = await http.delete(url, headers=_headers(TOKENS["agent-a"], session))
        assert ended.status_code == 200, ended.text
        # gone for everyone now: the SDK's own 404 for an unknown session
        for token in TOKENS.values():
            after = await _list(http, url, token, session)
            assert after.status_code == 404, after.text


@asynccontextmanager
async def _legacy_client(
    url: str, token: str, sessions: list[str], **kwargs: Any
) -> AsyncIterator[Client]:
    """The SDK's client over the handshake era, noting each Mcp-Session-Id it is given."""

    async def note(response: httpx2.Response) -> None:
        session = response.headers.get("mcp-session-id")
        if session and session not in sessions:
            sessions.append(session)

    async with (
        httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
            event_hooks={"response": [note]},
        ) as http,
        Client(
            streamable_http_client(url, http_client=http), cache=None, mode="legacy", **kwargs
        ) as c,
    ):
        yield c


async def test_another_token_cannot_answer_a_sessions_question(
    gw: GatewayProcess, box: Sandbox, actions_log: Path
) -> None:
    """The attack: agent-b answers agent-a's pending elicitation with agent-a's session id.

    agent-a's prompt-row call waits for an approver and shows agent-a the approvals
    page (an elicitation over its session). agent-b's forged answer to that question
    gets 404 and never reaches the SDK; the call is not run, and the decision log
    holds agent-a's own call only.
    """
    url = gw.endpoint()
    sessions: list[str] = []
    questions: list[str] = []
    hostile: list[httpx2.Response] = []

    async def answer(
        context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        questions.append(params.message)
        (session,) = sessions
        forged = {
            "jsonrpc": "2.0",
            "id": context.request_id,
            "result": {"action": "accept", "content": {"approve": True}},
        }
        async with httpx2.AsyncClient(timeout=30) as http:
            hostile.append(
                await http.post(url, json=forged, headers=_headers(TOKENS["agent-b"], session))
            )
        return types.ElicitResult(action="decline")

    async with _legacy_client(url, TOKENS["agent-a"], sessions, elicitation_callback=answer) as c:
        result = await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})
    assert len(questions) == 1
    (response,) = hostile
    assert _refused(response), response.text
    assert result.is_error
    assert "not run" in text_of(result)
    assert actions(actions_log) == []
    # agent-a's own call, still waiting for a person; nothing approved, nobody else's line
    logged = decisions(box)
    assert logged
    assert {(d["tool"], d["client"]) for d in logged} == {("mcp__vsphere__mystery_tool", "agent-a")}
    assert logged[-1]["answer"] == "waiting"
    assert all(d.get("answer") != "approved" for d in logged)
