"""What the approval stores' behaviour suites share: both stores (files, Redis) as one
fixture, a request, and work run in threads released at once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from support.fakes import FakeClock
from zerto_rewind.core.approvals import (
    ApprovalRequest,
    ApprovalStore,
    new_request,
)
from zerto_rewind.core.approvals_redis import RedisApprovalStore
from zerto_rewind.core.record_mac import RecordMac

# The replicas' shared MAC key, as each reads it from its state directory.
MAC = RecordMac(b"k" * 32)
EXPIRES_S = 600.0


class Stores:
    """The store under test, its kind, and more replicas of it on the same state."""

    def __init__(self, kind: str, make: Callable[[], Any], clock: FakeClock) -> None:
        self.kind = kind
        self.clock = clock
        self._make = make
        self._made: list[Any] = []
        self.store: ApprovalStore = self.replica()

    def replica(self) -> ApprovalStore:
        store = self._make()
        self._made.append(store)
        return store  # type: ignore[no-any-return]

    def close(self) -> None:
        for store in self._made:
            if isinstance(store, RedisApprovalStore):
                store.close()


def a_request(
    now: float,
    *,
    principal: str = "token:agent-a",
    tool: str = "power_off_vm",
    args: Any = None,
    expires_s: float = EXPIRES_S,
) -> ApprovalRequest:
    return new_request(
        tool=tool,
        tool_input={"vm": "web-01"} if args is None else args,
        vms=["web-01"],
        row="vm_unknown",
        why="web-01 is not in a VPG",
        principal=principal,
        expires_s=expires_s,
        host="gw-1",
        now=now,
    )


def run_together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """``work(i)`` in ``count`` threads released at once; their results (an exception fails)."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


# --------------------------------------------------------------------------- opening
