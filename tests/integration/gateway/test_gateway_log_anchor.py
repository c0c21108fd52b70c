"""The gateway anchors its decision log; a cut or rewritten log fails `log --verify`.

Real processes throughout: `gateway --listen` with the stand-in VM server and the
simulator, a real Redis (``state.url``), the SDK's client, and `zerto-rewind log
--verify` as a person runs it. The tampering is what someone with write access to
the log file alone can do: cut its last half, or write a whole new chain with
recomputed hashes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from integration.gateway.gateway_helpers import (
    TOKENS,
    client,
    gateway_config,
    gateway_process,
)
from support.redis_server import RedisServer
from support.webhook_receiver import Receiver
from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.log_anchor import redis_key
from zerto_rewind.gateway.notify import verify_signature
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.anyio


def run_verify(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "log", "--verify", *args],
        capture_output=True, text=True, env=box.env(), timeout=60, check=False,
    )  # fmt: skip


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    directory = tmp_path / "redis"
    directory.mkdir()
    with RedisServer(directory, password="anchor-pw-0123") as server:
        yield server


WEBHOOK_SECRET = "anchor-webhook-secret-0123456789"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as running:
        yield running


@pytest.fixture
async def logged(
    box: Sandbox, tmp_path: Path, actions_log: Path, redis: RedisServer, receiver: Receiver
) -> list[bytes]:
    """Six log lines through a real gateway, which then stops cleanly (SIGTERM): two
    forwarded changes, each with its result line, and two denied calls."""
    notify = {"url": receiver.url, "secret_env": "ZR_ANCHOR_WEBHOOK_SECRET"}
    secret = tmp_path / "redis-password"  # never in the URL: the config refuses that
    secret.write_text(redis.password or "")
    secret.chmod(0o600)
    gateway_config(
        box,
        actions_log,
        log_anchor={"every_lines": 4},
        state={"url": f"redis://127.0.0.1:{redis.port}/0", "password_file": str(secret)},
        approvals={"notify": notify},
    )
    env = box.env(ZR_ANCHOR_WEBHOOK_SECRET=WEBHOOK_SECRET)
    with gateway_process(box, tmp_path, env=env) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            for _ in range(2):
                await c.call_tool("power_off_vm", {"name": "jp-ubuntu"})
                await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})  # unlisted: denied
    return Path(box.log_path).read_bytes().splitlines()


async def test_the_gateway_anchors_its_log_in_the_state_dir_and_redis(
    logged: list[bytes], box: Sandbox, redis: RedisServer
) -> None:
    assert len(logged) == 6
    good = run_verify(box)
    # anchored at its first line, at the 5th (4 later), and at the clean stop (the 6th)
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.startswith("log OK: 6 lines, chain intact; anchored at seq 6 ("), good.stdout
    copy = redis.client().get(redis_key(box.log_path))
    assert copy is not None
    assert json.loads(copy)["seq"] == 6
    key = Path(box.state_dir, "log-anchor.key")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    anchors = list(Path(box.state_dir, "log-anchors").iterdir())
    assert [a.suffix for a in anchors] == [".json"]
    assert os.path.dirname(box.log_path) != str(anchors[0].parent)


async def test_each_anchor_reaches_the_webhook_signed(
    logged: list[bytes], receiver: Receiver
) -> None:
    """The first line's and the fifth's; the stop's goes to the file and Redis only (the
    gateway's tasks have ended by then)."""
    events = [json.loads(post["body"]) for post in receiver.posts]
    anchors = [e["anchor"] for e in events if e["event"] == "log.anchor"]
    assert [a["seq"] for a in anchors] == [1, 5]
    for post in receiver.posts:
        headers = post["headers"]
        assert verify_signature(
            WEBHOOK_SECRET,
            headers["X-Zerto-Rewind-Timestamp"],
            post["body"],
            headers["X-Zerto-Rewind-Signature"],
        )


async def test_a_cut_log_fails_verify_naming_the_cut(
    logged: list[bytes], box: Sandbox, redis: RedisServer, tmp_path: Path
) -> None:
    Path(box.log_path).write_bytes(b"".join(line + b"\n" for line in logged[:3]))
    cut = run_verify(box)
    assert cut.returncode == 1
    assert cut.stdout.count("\n") == 1
    assert cut.stdout.startswith("log CUT: the log ends at seq 3, but the anchor of "), cut.stdout
    assert "vouches for seq 6: 3 lines cut from its end" in cut.stdout
    # a copy kept elsewhere (here: the one Redis holds) tells the same
    copy = tmp_path / "anchor-copy.json"
    copy.write_bytes(redis.client().get(redis_key(box.log_path)) or b"")
    elsewhere = run_verify(box, "--anchor", str(copy))
    assert (elsewhere.returncode, elsewhere.stdout.split(":")[0]) == (1, "log CUT")


async def test_a_webhook_body_kept_by_its_receiver_is_an_anchor_copy(
    logged: list[bytes], box: Sandbox, receiver: Receiver, tmp_path: Path
) -> None:
    """The receiver keeps the body as it came; --anchor reads it as it is."""
    kept = tmp_path / "webhook-body.json"
    kept.write_bytes(receiver.posts[-1]["body"])  # the anchor of seq 5
    assert run_verify(box, "--anchor", str(kept)).returncode == 0
    Path(box.log_path).write_bytes(b"".join(line + b"\n" for line in logged[:4]))
    cut = run_verify(box, "--anchor", str(kept))
    assert cut.returncode == 1
    assert "the log ends at seq 4, but the anchor of " in cut.stdout
    assert "vouches for seq 5: 1 line cut from its end" in cut.stdout


async def test_a_rewritten_chain_fails_verify(
    logged: list[bytes], box: Sandbox, tmp_path: Path
) -> None:
    """A new chain, every seq and prev recomputed: the chain holds, the anchor does not."""
    forged = tmp_path / "forged.log"
    for raw in logged:
        record = json.loads(raw)
        for key in ("seq", "prev", "event_id"):
            record.pop(key)
        if record.get("decision") == "deny":
            record.update(decision="none", outcome="allowed")  # hide the denials
        write_record(str(forged), record)
    os.replace(forged, box.log_path)
    rewritten = run_verify(box)
    assert rewritten.returncode == 1
    assert rewritten.stdout.startswith(
        "log REWRITTEN: the line with seq 6 is not the one anchored at "
    ), rewritten.stdout


async def test_an_idle_gateways_tail_is_anchored_and_cutting_it_fails_verify(
    box: Sandbox, tmp_path: Path, actions_log: Path
) -> None:
    """No clean stop, no later line: the head is anchored within ``every_s`` all the same,
    so cutting the last lines of a running, idle gateway's log is seen."""
    gateway_config(box, actions_log, log_anchor={"every_s": 1})
    with gateway_process(box, tmp_path) as gw:
        async with client(gw.endpoint(), TOKENS["agent-a"]) as c:
            for _ in range(3):
                await c.call_tool("mystery_tool", {"name": "jp-ubuntu"})  # unlisted: denied
        lines = Path(box.log_path).read_bytes().splitlines()
        anchors = Path(box.state_dir, "log-anchors")
        deadline = time.monotonic() + 20
        while json.loads(next(anchors.iterdir()).read_text())["seq"] != len(lines):
            assert time.monotonic() < deadline, "the idle gateway did not anchor its head"
            await anyio.sleep(0.2)
        assert Path(box.log_path).read_bytes().splitlines() == lines  # nothing logged since
        Path(box.log_path).write_bytes(b"".join(line + b"\n" for line in lines[:-1]))
        cut = run_verify(box)
    assert cut.returncode == 1, cut.stdout
    assert cut.stdout.startswith(f"log CUT: the log ends at seq {len(lines) - 1}, but the anchor")
    assert f"vouches for seq {len(lines)}: 1 line cut from its end" in cut.stdout
