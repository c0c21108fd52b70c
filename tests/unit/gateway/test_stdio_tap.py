"""The fast lane's tap on a stdio upstream's pipes (gateway/stdio_tap.py), on a fake stdin:
its requests are written under ids of its own and answered by those ids only."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from zerto_rewind.gateway.stdio_tap import LaneClosedError, LaneTap

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeStdin:
    """What the tap writes to the server's stdin, line by line."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    async def send(self, data: bytes) -> None:
        assert data.endswith(b"\n")
        assert data.count(b"\n") == 1  # one line: nothing it quotes can split it
        self.lines.append(json.loads(data))


async def test_a_request_is_answered_by_its_own_id_only() -> None:
    tap, stdin = LaneTap(), FakeStdin()
    tap.attach(stdin)  # type: ignore[arg-type]
    got: list[dict[str, Any]] = []
    message = {"method": "tools/call", "params": {"name": "get_vm", "arguments": {}}}

    async def ask() -> None:
        got.append(await tap.request(message, 5.0))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        sent = stdin.lines[0]
        assert sent["id"].startswith("zr-lane-")
        assert {k: v for k, v in sent.items() if k != "id"} == {"jsonrpc": "2.0", **message}
        # The SDK's own answers, and a result that merely quotes the id, are not the tap's.
        assert not tap.claim('{"jsonrpc":"2.0","id":1,"result":{}}')
        quoted = {"jsonrpc": "2.0", "id": 2, "result": {"text": f'"id":"{sent["id"]}"'}}
        assert not tap.claim(json.dumps(quoted))
        assert not tap.claim(f'{{"id":"{sent["id"]}"')  # not JSON
        answer = {"jsonrpc": "2.0", "id": sent["id"], "result": {"content": []}}
        assert tap.claim(json.dumps(answer))
    assert got == [answer]
    assert not tap.claim(json.dumps(answer)), "answered once; a late copy goes to the SDK"


async def test_a_request_times_out_and_fails_when_the_pipes_close() -> None:
    tap = LaneTap()
    with pytest.raises(LaneClosedError):
        await tap.request({"method": "tools/call"}, 5.0)
    tap.attach(FakeStdin())  # type: ignore[arg-type]
    with pytest.raises(TimeoutError):
        await tap.request({"method": "tools/call"}, 0.05)
    failed: list[BaseException] = []

    async def ask() -> None:
        try:
            await tap.request({"method": "tools/call"}, 5.0)
        except LaneClosedError as exc:
            failed.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        tap.detach()
    assert len(failed) == 1
    assert not tap.open
