"""The test suite's fakes, one home for all: a clock and two scripted ZVMs.

* :class:`FakeClock`: time that moves only when a test moves it or the code sleeps;
* :class:`FakeZvm`: a ZVM over ``httpx.MockTransport`` (a token endpoint plus routes),
  for the ZVM client's own tests;
* :class:`FakeZvmClient`: the ``ZvmClient`` methods recovery and preview call, scripted
  (VPGs, journals, tasks), for the layers above the client; :func:`cp` makes a checkpoint.

The config writer that creates files 0600 is :func:`support.config.write_config`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import httpx

from zerto_rewind.errors import ZvmTimeout
from zerto_rewind.zvm.models import Checkpoint, Task, VmRef, Vpg

__all__ = ["NOW", "TOKEN_PATH", "FakeClock", "FakeZvm", "FakeZvmClient", "Handler", "cp"]

TOKEN_PATH = "/auth/realms/zerto/protocol/openid-connect/token"

Handler = Callable[[httpx.Request], httpx.Response]
# 2027-01-15T08:00:00Z: far from any real clock, so no test leans on time.time().
NOW = 1_800_000_000.0


class FakeClock:
    """Time that moves only when a test moves it (``now``, :meth:`advance`) or the code
    under test sleeps.

    Called, or as :meth:`mono`, it reads ``now``; :meth:`wall` reads ``now`` plus a fixed
    offset (``wall=`` is the wall time at the start), so the two move together.
    ``at(wall_time, action)`` runs ``action`` once the clock passes ``wall_time``: that is
    how a test changes the world in the middle of the code's wait.
    """

    def __init__(self, now: float = 1000.0, *, wall: float | None = None) -> None:
        self.now = now
        self.offset = 0.0 if wall is None else wall - now
        self.sleeps: list[float] = []
        self._events: list[tuple[float, Callable[[], None]]] = []

    def __call__(self) -> float:
        return self.now

    def mono(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self.offset

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        self.now += max(0.0, seconds)
        due = [e for e in self._events if e[0] <= self.wall()]
        self._events = [e for e in self._events if e[0] > self.wall()]
        for _at, action in sorted(due, key=lambda e: e[0]):
            action()

    def at(self, wall_time: float, action: Callable[[], None]) -> None:
        self._events.append((wall_time, action))


class FakeZvm:
    """A scripted ZVM: a token endpoint plus routes keyed by (method, path)."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler | Any] = {}
        self.requests: list[httpx.Request] = []
        self.tokens_issued = 0
        self.expires_in = 300
        self.valid_tokens: set[str] = set()
        self.token_status = 200

    def route(self, method: str, path: str, answer: Handler | Any) -> None:
        """Answer ``method path`` with JSON ``answer``, or call it if it is a handler."""
        self.routes[(method, path)] = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == TOKEN_PATH:
            return self._token(request)
        auth = request.headers.get("Authorization", "")
        if auth.removeprefix("Bearer ") not in self.valid_tokens:
            return httpx.Response(401)
        answer = self.routes.get((request.method, request.url.path))
        if answer is None:
            return httpx.Response(404, json={"Message": f"no route {request.url.path}"})
        if callable(answer):
            return answer(request)
        return httpx.Response(200, json=answer)

    def _token(self, request: httpx.Request) -> httpx.Response:
        if self.token_status != 200:
            body = {
                "error": "unauthorized_client",
                "error_description": "Invalid client credentials",
            }
            return httpx.Response(self.token_status, json=body)
        self.tokens_issued += 1
        token = f"tok-{self.tokens_issued}"
        self.valid_tokens.add(token)
        answer: dict[str, Any] = {
            "access_token": token,
            "expires_in": self.expires_in,
            "refresh_token": "refresh-secret",
            "token_type": "Bearer",
        }
        return httpx.Response(200, json=answer)

    def api_requests(self) -> list[httpx.Request]:
        """Requests other than token requests."""
        return [r for r in self.requests if r.url.path != TOKEN_PATH]


def cp(cp_id: str, epoch: float, tag: str | None = None) -> Checkpoint:
    """A checkpoint at ``epoch``, tagged ``tag`` if given."""
    return Checkpoint(cp_id, datetime.fromtimestamp(epoch, UTC), tag, 1 if tag else 0)


class FakeZvmClient:
    """The ZvmClient methods recovery and preview call, scripted; it never requests a tag.

    ``add`` makes a VPG. Its journal is the shared ``journal``, or, with
    ``journal_cadence`` (or ``add(cadence=...)``), its own: 60 checkpoints at that cadence,
    the latest ``last`` seconds before ``now``. Tasks end as ``task_state`` says (6,
    completed), a task whose id starts with ``failed`` as failed. ``asked`` records each
    read; ``calls`` each checkpoint listing (did it give ``since``) and each task started.
    """

    def __init__(self, *, journal_cadence: float | None = None, now: float = NOW) -> None:
        self.settings = SimpleNamespace(url="https://zvm.test")
        self.journal_cadence = journal_cadence
        self.now = now
        self.refs: dict[str, list[VmRef]] = {}
        self.vpgs: dict[str, Vpg] = {}
        self.journal: list[Checkpoint] = []
        self.journals: dict[str, list[Checkpoint]] = {}
        self.asked: list[str] = []
        self.calls: list[tuple[Any, ...]] = []
        self.task_state = 6  # Completed
        self.complete_reason: str | None = None

    def add(
        self,
        name: str,
        vms: str | list[str],
        *,
        entity: int = 0,
        sub: int = 0,
        test: bool = False,
        cadence: float | None = None,
        last: float = 2.0,
    ) -> str:
        """A VPG protecting ``vms``; ``test``: a failover test is running on it."""
        vpg_id = f"id-{name}"
        wire: dict[str, Any] = {"VpgIdentifier": vpg_id, "VpgName": name, "Status": 1}
        wire |= {"SubStatus": sub, "RecoverySiteName": "dr"}
        wire["Entities"] = {"Protected": entity, "Recovery": 0}
        wire["ActiveProcessesApi"] = {"RunningFailOverTestApi": {"Stage": "x"} if test else None}
        self.vpgs[vpg_id] = Vpg.from_wire(wire)
        every = cadence or self.journal_cadence
        if every is not None:
            stamps = [self.now - last - every * k for k in range(60)][::-1]
            self.journals[vpg_id] = [cp(str(1000 + i), t) for i, t in enumerate(stamps)]
        for vm in [vms] if isinstance(vms, str) else vms:
            self.refs.setdefault(vm, []).append(VmRef(f"vm-{vm}", vm, vpg_id, name))
        return vpg_id

    def find_vms(self, name: str, *, deadline: Any = None) -> list[VmRef]:
        self.asked.append(f"find_vms {name}")
        return list(self.refs.get(name, []))

    def get_vpg(self, vpg_id: str, *, deadline: Any = None) -> Vpg:
        self.asked.append(f"get_vpg {vpg_id}")
        return self.vpgs[vpg_id]

    def entity_types(self, *, deadline: Any = None) -> list[str]:
        self.asked.append("entity_types")
        return ["VCVpg", "VCvApp", "VCDvApp", "PublicCloud-AWS", "HyperV", "PublicCloud-Azure"]

    def list_checkpoints(
        self, vpg_id: str, *, since: Any = None, until: Any = None, deadline: Any = None
    ) -> list[Checkpoint]:
        self.asked.append(f"list_checkpoints {vpg_id}")
        self.calls.append(("list_checkpoints", since is not None))
        journal = self.journals.get(vpg_id, self.journal)
        return [c for c in journal if since is None or c.timestamp >= since]

    def tag_checkpoint(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("a fake ZVM client is never asked for a tag")

    def get_task(self, task_id: str, *, deadline: Any = None) -> Task:
        self.asked.append(f"get_task {task_id}")
        failed = task_id.startswith("failed")
        state = 4 if failed else self.task_state
        wire: dict[str, Any] = {
            "TaskIdentifier": task_id,
            "Status": {"State": state, "Progress": 40},
        }
        wire["CompleteReason"] = "VRA on esx07 did not answer" if failed else self.complete_reason
        return Task.from_wire(wire)

    def wait_for_task(self, task_id: str, *, deadline: Any = None, poll_s: float = 0.5) -> Task:
        task = self.get_task(task_id)
        if not task.done:
            msg = "still running"
            raise ZvmTimeout(msg)
        return task

    def _task(self, *call: Any) -> str:
        self.calls.append(call)
        return f"task-{len(self.calls)}"

    def failover_test(
        self, vpg_id: str, checkpoint_id: Any = None, vm_ids: Any = None, *, deadline: Any = None
    ) -> str:
        return self._task("failover_test", vpg_id, checkpoint_id, vm_ids)

    def failover_test_stop(
        self, vpg_id: str, success: bool, summary: str, *, deadline: Any = None
    ) -> str:
        return self._task("failover_test_stop", vpg_id, success, summary)

    def failover(self, vpg_id: str, checkpoint_id: str, **kwargs: Any) -> str:
        kwargs.pop("deadline", None)
        return self._task("failover", vpg_id, checkpoint_id, kwargs)

    def failover_commit(
        self, vpg_id: str, reverse_protection: bool, *, deadline: Any = None
    ) -> str:
        return self._task("failover_commit", vpg_id, reverse_protection)

    def failover_rollback(self, vpg_id: str, *, deadline: Any = None) -> str:
        return self._task("failover_rollback", vpg_id)

    def restore_vm(self, vm_id: str, vpg_id: str, checkpoint_id: str, **kwargs: Any) -> str:
        return self._task("restore_vm", vm_id, vpg_id, checkpoint_id, kwargs["restored_vm_name"])

    def restore_commit(self, vm_id: str, vpg_id: str, *, deadline: Any = None) -> str:
        return self._task("restore_commit", vm_id, vpg_id)

    def restore_rollback(self, vm_id: str, vpg_id: str, *, deadline: Any = None) -> str:
        return self._task("restore_rollback", vm_id, vpg_id)

    def operations(self) -> list[str]:
        """The names of the state-changing calls made."""
        return [c[0] for c in self.calls if c[0] != "list_checkpoints"]
