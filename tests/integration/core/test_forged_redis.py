"""Records forged in Redis are absent: whoever else writes to the shared state approves nothing.

A real redis-server; the forger writes with a plain client, as an agent's user
that reaches the Redis would (a few bytes of RESP), without the guard's MAC key.
"""

from __future__ import annotations

import json
import time
from typing import Any

import redis

from zerto_rewind.core.approvals import APPROVED, ApprovalRequest, arguments_digest, new_request
from zerto_rewind.core.approvals_redis import RedisApprovalStore
from zerto_rewind.core.record_mac import MAC_FIELD, RecordMac
from zerto_rewind.core.state import TagRecord
from zerto_rewind.core.state_redis import RedisGuardState

MAC = RecordMac(b"k" * 32)
PRINCIPAL = "token:agent-a"


def a_request(vm: str) -> ApprovalRequest:
    return new_request(
        tool="power_off_vm",
        tool_input={"vm": vm},
        vms=[vm],
        row="vm_unknown",
        why=f"{vm} is not in a VPG",
        principal=PRINCIPAL,
    )


def raw_get(url: str, key: str) -> dict[str, Any]:
    with redis.Redis.from_url(url) as client:
        value = client.get(key)
    assert isinstance(value, bytes)
    data: dict[str, Any] = json.loads(value)
    return data


def raw_set(url: str, key: str, data: dict[str, Any]) -> None:
    with redis.Redis.from_url(url) as client:
        client.set(key, json.dumps(data))


def test_a_request_set_to_approved_in_redis_is_absent(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    request, _ = store.open_request(a_request("web-01"))
    key = f"zerto-rewind:approvals:req:{request.id}"
    raw = raw_get(redis_url, key)
    raw.update(state=APPROVED, decided_by="unix:alice", decided_at=time.time())
    raw_set(redis_url, key, raw)  # the genuine MAC, now over other content
    assert store.get(request.id) is None
    assert store.pending() == []
    digest = arguments_digest({"vm": "web-01"})
    assert store.consume(PRINCIPAL, "power_off_vm", digest) is None
    assert store.consume(PRINCIPAL, "power_off_vm", digest, request.id) is None


def test_a_request_written_without_a_mac_is_absent(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    request, _ = store.open_request(a_request("web-01"))
    key = f"zerto-rewind:approvals:req:{request.id}"
    raw = raw_get(redis_url, key)
    raw.pop(MAC_FIELD)
    raw.update(state=APPROVED, decided_by="unix:alice", decided_at=time.time())
    raw_set(redis_url, key, raw)  # as a record of an earlier version, or a forger's
    assert store.get(request.id) is None
    assert store.consume(PRINCIPAL, "power_off_vm", arguments_digest({"vm": "web-01"})) is None


def test_an_approved_request_swapped_under_another_id_is_absent(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    harmless, _ = store.open_request(a_request("scratch-01"))
    store.decide(harmless.id, True, "unix:alice")
    wanted, _ = store.open_request(a_request("prod-db"))
    approved = raw_get(redis_url, f"zerto-rewind:approvals:req:{harmless.id}")
    approved["id"] = wanted.id
    raw_set(redis_url, f"zerto-rewind:approvals:req:{wanted.id}", approved)
    assert store.get(wanted.id) is None
    assert store.consume(PRINCIPAL, "power_off_vm", arguments_digest({"vm": "prod-db"})) is None
    # the genuine approval still covers its own call only
    assert store.consume(PRINCIPAL, "power_off_vm", arguments_digest({"vm": "scratch-01"}))


def test_an_approval_put_back_in_redis_after_its_use_is_not_used_again(redis_url: str) -> None:
    store = RedisApprovalStore(redis_url, mac=MAC)
    request, _ = store.open_request(a_request("web-01"))
    store.decide(request.id, True, "unix:alice")
    key = f"zerto-rewind:approvals:req:{request.id}"
    approved = raw_get(redis_url, key)
    digest = arguments_digest({"vm": "web-01"})
    assert store.consume(PRINCIPAL, "power_off_vm", digest) is not None
    raw_set(redis_url, key, approved)  # a replay: its MAC verifies
    replayed = store.get(request.id)
    assert replayed is not None
    assert replayed.state == APPROVED
    assert store.consume(PRINCIPAL, "power_off_vm", digest) is None


def test_a_landed_tag_changed_or_copied_in_redis_is_absent(redis_url: str) -> None:
    state = RedisGuardState(redis_url, mac=MAC)
    with state.vpg("vpg-1") as record:
        record.tag = TagRecord("zr t", 1.0, 6.0, 66.0, state="landed", checkpoint_id="cp-1")
    genuine = raw_get(redis_url, "zerto-rewind:vpg:vpg-1")
    raw_set(redis_url, "zerto-rewind:vpg:vpg-2", genuine)  # copied to another VPG
    assert state.peek_vpg("vpg-2").tag is None
    changed = dict(genuine, allowed_since_landing=0, tag=dict(genuine["tag"], landed_at=2.0))
    raw_set(redis_url, "zerto-rewind:vpg:vpg-1", changed)
    assert state.peek_vpg("vpg-1").tag is None
    forged = {k: v for k, v in genuine.items() if k != MAC_FIELD}
    raw_set(redis_url, "zerto-rewind:vpg:vpg-3", forged)  # no MAC at all
    assert state.peek_vpg("vpg-3").tag is None


def test_a_forged_cache_entry_in_redis_is_a_miss(redis_url: str) -> None:
    state = RedisGuardState(redis_url, mac=MAC)
    state.store("vms", "web01", [["vm-1", "vpg-1", "VPG One"]])
    with redis.Redis.from_url(redis_url) as client:
        (key,) = [k.decode() for k in client.keys("zerto-rewind:cache:vms:*")]
    raw = raw_get(redis_url, key)
    raw["value"] = [["vm-1", "vpg-9", "Protected elsewhere"]]
    raw_set(redis_url, key, raw)
    assert state.cached("vms", "web01", ttl_s=60) is None
