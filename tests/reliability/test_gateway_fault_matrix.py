"""The gateway's fault matrix: each gateway fault × {read-only, mutating, unlisted}.

Zero forwarded-unguarded calls: every call that reaches the upstream (it
records each one on arrival, before misbehaving) is matched by a decision in
the gateway's log that allowed it — ``none`` for a read-only tool, ``context``
with a landed checkpoint for a mutating one. An unlisted call is never
forwarded (the SDK client declares no elicitation). Each fault runs against its
own gateway process (``zerto-rewind gateway --listen``) with its own state
directory, log and upstream. ``scripts/fault-matrix`` reruns this file and
writes the table in docs/reliability.md (``ZERTO_GATEWAY_FAULT_MATRIX_REPORT``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from support.redis_server import RedisServer
from zerto_rewind.config import load_settings
from zerto_rewind.core.call_result import RESULT_EVENT
from zerto_rewind.core.catalog import READ_ONLY, classify
from zerto_rewind.gateway.http import token_digest
from zerto_rewind.testing import Sandbox

UPSTREAM = Path(__file__).with_name("gateway_upstream.py")
BUDGET_S = 4.0
UPSTREAM_TIMEOUT_S = 3.0
TOKEN = "matrix-token-0123456789"
MAX_BODY = 64_000
CALLS: dict[str, tuple[str, dict[str, str]]] = {
    "read-only": ("get_vm", {"name": "jp-ubuntu"}),
    "mutating": ("power_off_vm", {"name": "jp-ubuntu"}),
    "unlisted": ("delete_datastore", {"datastore": "ds1"}),
}


@dataclass
class Gw:
    """One gateway process for one fault, and the files that show what it did."""

    box: Sandbox
    url: str
    base: str
    root: Path
    log: Path
    actions: Path
    control: Path
    redis: RedisServer | None = None


@dataclass(frozen=True)
class Fault:
    name: str
    setup: Callable[[Gw], None]  # before each call
    send: str  # how the call is made: sdk, disconnect, bad-token, malformed, oversized
    redis: bool = False
    settle_s: float = 0.0  # wait before counting: an abandoned call may still be decided


def _nothing(gw: Gw) -> None:
    return None


def _control(mode: str) -> Callable[[Gw], None]:
    def setup(gw: Gw) -> None:
        gw.control.write_text(mode)

    return setup


def _zvm_down(gw: Gw) -> None:
    for route in ("/v1/.*", "/auth/.*"):
        gw.box.control("POST", "/_sim/faults", {"route": route, "kind": "drop"})


def _redis_down(gw: Gw) -> None:
    assert gw.redis is not None
    gw.redis.stop()


FAULTS = [
    Fault("upstream crash (exits mid-call)", _control("crash"), "sdk"),
    Fault("upstream hang (never answers)", _control("hang"), "sdk"),
    Fault("client disconnect (hangs up 0.3 s in)", _nothing, "disconnect",
          settle_s=BUDGET_S + 1.5),
    Fault("Redis down (state.url, server stopped)", _redis_down, "sdk", redis=True),
    Fault("ZVM down (every ZVM connection dropped)", _zvm_down, "sdk"),
    Fault("bad token", _nothing, "bad-token"),
    Fault("malformed JSON-RPC (truncated body, wrong shape)", _nothing, "malformed"),
    Fault(f"oversized body (> {MAX_BODY} bytes)", _nothing, "oversized"),
]  # fmt: skip


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    guard = {"timeout_s": BUDGET_S, "landing_allowance_s": 0.5}
    with Sandbox(str(tmp_path_factory.mktemp("gw-matrix")), guard=guard) as sandbox:
        yield sandbox


@pytest.fixture(scope="module", params=FAULTS, ids=[f.name for f in FAULTS])
def fault_gw(
    request: pytest.FixtureRequest, box: Sandbox, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Fault, Gw]]:
    """A fresh gateway for each fault (tests are grouped by fault, one start each)."""
    fault: Fault = request.param
    root = tmp_path_factory.mktemp("gw-fault")
    box.control("POST", "/_sim/reset")
    box.control("DELETE", "/_sim/faults")
    redis = RedisServer(root, password="matrix-redis-pw") if fault.redis else None
    if redis is not None:
        redis.start()
    upstream = {
        "command": [sys.executable, str(UPSTREAM)],
        "env": {
            "GW_UPSTREAM_ACTIONS": str(root / "actions.jsonl"),
            "GW_UPSTREAM_CONTROL": str(root / "control"),
        },
        "timeout_s": UPSTREAM_TIMEOUT_S,
    }
    extra: dict[str, Any] = {}
    if redis is not None:
        password_file = root / "redis-password"
        password_file.write_text("matrix-redis-pw")
        password_file.chmod(0o600)
        url = f"redis://127.0.0.1:{redis.port}/0"
        extra["state"] = {"url": url, "password_file": str(password_file)}
    box.write_config(
        upstreams={"vsphere": upstream},
        gateway={
            "clients": {"matrix": token_digest(TOKEN)},
            "metrics_clients": {"matrix": token_digest(TOKEN)},
            "max_body_bytes": MAX_BODY,
        },
        state_dir=str(root / "state"),
        log=str(root / "decisions.log"),
        **extra,
    )
    ready = root / "ready.json"
    with (root / "gateway.stderr").open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
             "--ready-file", str(ready), "--allow-privileged-upstream"],
            env=box.env(ZERTO_HOOK_LOG=str(root / "decisions.log"),
                        ZERTO_REWIND_STATE_DIR=str(root / "state")),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    try:
        info = _wait_ready(proc, ready, root)
        gw = Gw(box, info["mcp"]["vsphere"], info["url"], root, root / "decisions.log",
                root / "actions.jsonl", root / "control", redis)  # fmt: skip
        yield fault, gw
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        if redis is not None:
            redis.stop()
        box.control("DELETE", "/_sim/faults")


def _wait_ready(proc: subprocess.Popen[bytes], ready: Path, root: Path) -> dict[str, Any]:
    """The ready file, then the upstream connected (so every fault starts from a live one)."""
    deadline = time.monotonic() + 30
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"gateway did not start: {(root / 'gateway.stderr').read_text()}")
        time.sleep(0.05)
    info: dict[str, Any] = json.loads(ready.read_text())
    while time.monotonic() < deadline:
        health = httpx.get(
            f"{info['url']}/healthz", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
        ).json()
        if health["upstreams"].get("vsphere") == "connected":
            return info
        time.sleep(0.1)
    pytest.fail("the gateway's upstream did not connect")


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


async def _sdk_call(url: str, tool: str, args: dict[str, str], hang_up_s: float | None) -> str:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        with anyio.move_on_after(hang_up_s if hang_up_s is not None else 60) as scope:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(streamable_http_client(url, http_client=http), cache=None) as client,
            ):
                result = await client.call_tool(tool, args)
                outcome = "tool error" if result.is_error else "result"
                return f"{outcome}: {_text(result)}"
    except Exception as exc:
        refusal = _handshake_refusal(exc)
        if refusal is None:
            raise
        return f"handshake refused: {refusal}"
    assert hang_up_s is not None, "the SDK call did not finish"
    assert scope.cancelled_caught
    return f"hung up after {hang_up_s:g} s"


def _handshake_refusal(exc: BaseException) -> str | None:
    """The gateway's own refusal of the connection's opening, wherever the SDK nests it.

    A gateway answers ``initialize`` only once its upstream has listed its tools; an
    upstream that hangs while the client connects makes the opening fail with the
    gateway's reason (no tool offered, so no call at all): a refusal, not a crash.
    """
    if isinstance(exc, MCPError) and str(exc).startswith("zerto-rewind:"):
        return str(exc)
    for inner in getattr(exc, "exceptions", ()):
        found = _handshake_refusal(inner)
        if found is not None:
            return found
    return _handshake_refusal(exc.__context__) if exc.__context__ is not None else None


def _raw(url: str, body: bytes, token: str) -> str:
    """One POST as a client would send it; the HTTP status and the start of the answer."""
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    response = httpx.post(url, content=body, headers=headers, timeout=30)
    return f"HTTP {response.status_code}: {' '.join(response.text.split())[:90]}"


def _call_body(tool: str, args: dict[str, str], **extra: Any) -> bytes:
    params = {"name": tool, "arguments": {**args, **extra}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
    ).encode()


def _send(fault: Fault, gw: Gw, tool: str, args: dict[str, str]) -> str:
    if fault.send == "sdk":
        return anyio.run(_sdk_call, gw.url, tool, args, None)
    if fault.send == "disconnect":
        return anyio.run(_sdk_call, gw.url, tool, args, 0.3)
    if fault.send == "bad-token":
        return _raw(gw.url, _call_body(tool, args), "not-the-token")
    if fault.send == "malformed":
        truncated = _raw(gw.url, _call_body(tool, args)[:-2], TOKEN)
        shape = json.dumps({"jsonrpc": "1.0", "method": "tools/call", "params": [tool, args]})
        wrong = _raw(gw.url, shape.encode(), TOKEN)
        return f"truncated → {truncated[:60]}; wrong shape → {wrong[:60]}"
    assert fault.send == "oversized"
    return _raw(gw.url, _call_body(tool, args, padding="a" * (MAX_BODY + 1000)), TOKEN)


def _allowing(record: dict[str, Any]) -> bool:
    """A decision that lets the call through: read-only, a landed checkpoint, or a human."""
    if record.get("answer") == "approved":
        return True
    if record["decision"] == "none":
        return bool(record["row"] == "read_only")
    return bool(record["decision"] == "context" and record["checkpoint_ids"])


def _read_only(gw: Gw, tool: str) -> bool:
    """The catalog's own verdict: the gateway answers read-only calls without a log line."""
    catalog = load_settings(gw.box.env()).catalog
    return classify(tool, {}, catalog).kind == READ_ONLY


def _unguarded(gw: Gw, forwarded: list[dict[str, Any]], decided: list[dict[str, Any]]) -> int:
    arrived = Counter(f"mcp__vsphere__{a['tool']}" for a in forwarded)
    allowed = Counter(d["tool"] for d in decided if _allowing(d))
    return sum(max(0, n - allowed[tool]) for tool, n in arrived.items() if not _read_only(gw, tool))


@pytest.mark.parametrize("call", list(CALLS))
def test_gateway_fault_forwards_nothing_unguarded(fault_gw: tuple[Fault, Gw], call: str) -> None:
    """Under the fault, whatever reaches the upstream was allowed by the guard first."""
    fault, gw = fault_gw
    tool, args = CALLS[call]
    gw.control.write_text("")
    actions_before, log_before = len(_lines(gw.actions)), len(_lines(gw.log))
    fault.setup(gw)
    started = time.monotonic()
    answer = _send(fault, gw, tool, args)
    elapsed = time.monotonic() - started
    gw.control.write_text("")
    time.sleep(fault.settle_s)
    forwarded = _lines(gw.actions)[actions_before:]
    logged = _lines(gw.log)[log_before:]
    # The gateway logs a decision per call, then a result line per forwarded change.
    decided = [d for d in logged if d.get("event_type") != RESULT_EVENT]
    results = [r["result"] for r in logged if r.get("event_type") == RESULT_EVENT]
    unguarded = _unguarded(gw, forwarded, decided)
    decision = ", ".join(f"{d['decision']} ({d['row']})" for d in decided) or (
        "none (read_only, not logged)"
        if _read_only(gw, f"mcp__vsphere__{tool}")
        else "— (not decided)"
    )
    _report(fault.name, call, decision, answer, len(forwarded), unguarded, elapsed)

    assert unguarded == 0, (answer, forwarded, decided)
    assert elapsed <= BUDGET_S + 2 * UPSTREAM_TIMEOUT_S + 2.0, answer
    if call == "unlisted":
        assert forwarded == [], "an unlisted call is never forwarded without a human"
    if fault.send == "sdk" and call != "read-only":
        # A hanging upstream may also stop the opening: the gateway then refuses the
        # connection with its reason, before any call (docs/gateway.md, ready at initialize).
        refusals = ("tool error", "handshake refused") if "hang" in fault.name else ("tool error",)
        assert answer.startswith(refusals), answer
    if (
        forwarded
        and call == "mutating"
        and fault.name.startswith(("upstream crash", "upstream hang"))
    ):
        # The change reached the VM server and no answer came back: nobody knows if it ran.
        assert results == ["unknown"], (answer, logged)
    if fault.send in ("bad-token", "malformed", "oversized"):
        assert forwarded == [], answer
        assert decided == [], answer
        assert "HTTP 2" not in answer, answer
        still = anyio.run(_sdk_call, gw.url, "get_vm", {"name": "jp-ubuntu"}, None)
        assert still.startswith("result"), f"the gateway stopped serving after {fault.name}"
    if fault.name.startswith(("Redis down", "ZVM down")) and call == "read-only":
        assert answer.startswith("result"), "read-only calls pass without Redis or the ZVM"


def _report(
    fault: str, call: str, decision: str, answer: str, forwarded: int, unguarded: int, s: float
) -> None:
    path = os.environ.get("ZERTO_GATEWAY_FAULT_MATRIX_REPORT")
    if path:
        row = {"fault": fault, "call": call, "decision": decision, "answer": answer,
               "forwarded": forwarded, "unguarded": unguarded, "seconds": round(s, 2)}  # fmt: skip
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
