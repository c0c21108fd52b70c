"""Fakes for the guard's and the tagger's unit tests: a fake clock and a ZVM client over the
simulator's own models (its backend, journal and tasks), with no HTTP and no real time.

The client answers from :class:`zerto_rewind.sim.state.Backend` through the simulator's
wire views and the client's own parsers, so journals, tag landing and task results
follow the simulator's rules; only the sockets are gone. Time moves only when the
code under test sleeps or a test advances the clock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from support.config import load_written_settings
from support.fakes import FakeClock
from support.sim import PAIRED_ESTATES
from zerto_rewind.config import Settings
from zerto_rewind.core.decision import ToolCall
from zerto_rewind.core.guard import Guard
from zerto_rewind.core.state import GuardState
from zerto_rewind.core.tagging import Tagger
from zerto_rewind.sim import enums, views
from zerto_rewind.sim.config import SimConfig
from zerto_rewind.sim.state import Backend
from zerto_rewind.zvm.models import Checkpoint, Task, VmRef, Vpg

URL = "https://zvm.sim.test"
TOOL = "mcp__vsphere__power_off_vm"
HOST_TOOL = "mcp__vsphere__host_maintenance"  # a tool whose catalog entry names a VPG
# 2027-01-15T08:00:00Z: far from any real clock, so no test leans on time.time().
START_WALL = 1_800_000_000.0
START_MONO = 5_000.0


class SimZvm:
    """The ZvmClient methods the guard uses, answered by the simulator's backend."""

    def __init__(self, backend: Backend, url: str = URL) -> None:
        self.backend = backend
        self.settings = SimpleNamespace(url=url, connect_timeout_s=5.0, read_timeout_s=30.0)
        self.calls: list[str] = []
        # a site that is dark: every request raises this (an estate test's fault)
        self.fault: Exception | None = None

    def _check(self) -> None:
        if self.fault is not None:
            raise self.fault

    def local_site(self, *, deadline: float | None = None) -> dict[str, Any]:
        self._check()
        self.calls.append("local_site")
        return views.local_site(self.backend, URL)

    def find_vms(self, name: str, *, deadline: float | None = None) -> list[VmRef]:
        self._check()
        self.calls.append(f"find_vms {name}")
        rows = self.backend.find_vms(name, None, None)  # the sim's filter ignores case
        refs = [VmRef.from_wire(views.vm(self.backend, URL, vm, vpg)) for vm, vpg in rows]
        return [r for r in refs if r.vm_name == name]  # exact, as ZvmClient.find_vms

    def get_vpg(self, vpg_id: str, *, deadline: float | None = None) -> Vpg:
        self._check()
        self.calls.append(f"get_vpg {self.name_of(vpg_id)}")
        return Vpg.from_wire(views.vpg(self.backend, URL, self.backend.vpg(vpg_id)))

    def find_vpg(self, name: str, *, deadline: float | None = None) -> Vpg:
        self._check()
        self.calls.append(f"find_vpg {name}")
        from zerto_rewind.errors import NotFound
        from zerto_rewind.sim.errors import SimError

        try:
            found = self.backend.vpg_named(name)
        except SimError:
            msg = f"no VPG named {name!r}"
            raise NotFound(msg, method="GET", url=f"{URL}/v1/vpgs", status=404) from None
        return Vpg.from_wire(views.vpg(self.backend, URL, found))

    def entity_types(self, *, deadline: float | None = None) -> list[str]:
        self._check()
        self.calls.append("entity_types")
        return list(enums.ENTITY_TYPES)

    def list_checkpoints(
        self,
        vpg_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        deadline: float | None = None,
    ) -> list[Checkpoint]:
        self._check()
        self.calls.append(f"list_checkpoints {self.name_of(vpg_id)}")
        found = self.backend.checkpoints(
            self.backend.vpg(vpg_id),
            None if since is None else since.timestamp() - 0.0005,
            None if until is None else until.timestamp() + 0.0005,
        )
        listed = [Checkpoint.from_wire(views.checkpoint(cp)) for cp in found]
        return sorted(listed, key=Checkpoint.sort_key)

    def tag_checkpoint(self, vpg_id: str, name: str, *, deadline: float | None = None) -> str:
        self._check()
        self.calls.append(f"tag {self.name_of(vpg_id)}")
        return self.backend.tag(self.backend.vpg(vpg_id), name).identifier

    def get_task(self, task_id: str, *, deadline: float | None = None) -> Task:
        self._check()
        self.calls.append("get_task")
        return Task.from_wire(views.task(self.backend, URL, self.backend.task(task_id)))

    def close(self) -> None:
        self.calls.append("close")

    # ---- for the tests

    def name_of(self, vpg_id: str) -> str:
        return self.backend.vpg(vpg_id).name

    def vpg_id(self, name: str) -> str:
        return self.backend.vpg_named(name).identifier

    def tag_requests(self, name: str) -> int:
        return self.backend.stats.tag_requests[name]

    def tags(self, name: str) -> list[str]:
        """Tags that have landed in the VPG's journal by now."""
        vpg = self.backend.vpg_named(name)
        return [c.tag for c in vpg.journal.list() if c.tag]

    def pause(self, name: str) -> None:
        """Replication paused by the user (status 2, sub-status 25): the journal stops."""
        self.backend.set_state(self.backend.vpg_named(name), 2, enums.SUB_PAUSED_USER)

    def tag_behaviour(self, name: str, mode: str, **fields: Any) -> None:
        from zerto_rewind.sim.models import TagBehaviour

        self.backend.vpg_named(name).tag_behaviour = TagBehaviour(mode, **fields)


class HookedState(GuardState):
    """A state directory that runs a test's action just before the Nth lock of a VPG.

    The guard takes a VPG's lock to plan and again to consume; an action on the
    second lock is another process acting between the two.
    """

    def __init__(self, state_dir: str) -> None:
        super().__init__(state_dir)
        self.locks: dict[str, int] = {}
        self._actions: dict[tuple[str, int], Callable[[], None]] = {}

    def before_lock(self, vpg_id: str, nth: int, action: Callable[[], None]) -> None:
        self._actions[(vpg_id, nth)] = action

    def vpg(self, vpg_id: str) -> Any:
        self.locks[vpg_id] = self.locks.get(vpg_id, 0) + 1
        action = self._actions.pop((vpg_id, self.locks[vpg_id]), None)
        if action is not None:
            action()
        return super().vpg(vpg_id)


def make_backend(clock: FakeClock, **config: Any) -> Backend:
    """The simulator's default estate (jp-local vCenter 5 s, CMH-AWS-1 630 s, EUS-AZ-1 60 s,
    paused-vpg, multi-a/multi-b sharing multi-1, syncing-vpg) on the fake wall clock, with
    no jitter so that cadence boundaries are exact."""
    values: dict[str, Any] = {
        "clock": clock.wall,
        "seed": 7,
        "jitter": 0.0,
        "tag_lag_s": 1.0,
        "task_duration_s": 0.3,
    }
    values.update(config)
    return Backend(SimConfig(**values))


def make_settings(tmp_path: Path, *, sites: list[str] | None = None, **guard: Any) -> Settings:
    """Settings with a vSphere-like catalog and the given guard knobs; with ``sites``, one
    ZVM per site (``zvms``, ``https://SITE.zvm.test``) and a tool that names VPG dr-own."""
    zvm = {"username": "u", "password": "p"}
    tools: dict[str, Any] = {TOOL: {"vm_arg": ["name", "names[]"]}}
    config: dict[str, Any] = {"zvm": {"url": URL, **zvm}}
    if sites is not None:
        config = {"zvms": {site: {"url": f"https://{site}.zvm.test", **zvm} for site in sites}}
        tools[HOST_TOOL] = {"vpgs": ["dr-own"]}
    config |= {
        "read_only_tools": ["mcp__vsphere__list_vms"],
        "tools": tools,
        "guard": guard,
        "state_dir": str(tmp_path / "state"),
    }
    return load_written_settings(tmp_path, config)


def clocked_guard(settings: Settings, state: GuardState, clock: FakeClock, **clients: Any) -> Guard:
    """A guard on the fake clock over fake ZVM clients (``client=`` or ``clients=``)."""
    return Guard(
        settings, state=state, wall=clock.wall, mono=clock.mono, sleep=clock.sleep, **clients
    )


class Rig:
    """One guard and one tagger over a simulated ZVM, a state directory and a fake clock."""

    def __init__(self, tmp_path: Path, *, sim: dict[str, Any] | None = None, **guard: Any):
        self.clock = FakeClock(START_MONO, wall=START_WALL)
        self.backend = make_backend(self.clock, **(sim or {}))
        self.zvm = SimZvm(self.backend)
        self.settings = make_settings(tmp_path, **guard)
        self.state = HookedState(self.settings.state_dir)

    def guard(self) -> Guard:
        return clocked_guard(self.settings, self.state, self.clock, client=self.zvm)

    def tagger(self) -> Tagger:
        return Tagger(
            self.zvm,  # type: ignore[arg-type]
            self.state,
            self.settings.guard,
            wall=self.clock.wall,
            mono=self.clock.mono,
            sleep=self.clock.sleep,
        )

    def call(self, *vms: str, started_at: float | None = None, session: str = "s1") -> ToolCall:
        """A mutating call on ``vms`` that started now (or at ``started_at``)."""
        tool_input: dict[str, Any] = {"name": vms[0]} if len(vms) == 1 else {"names": list(vms)}
        started = self.clock.wall() if started_at is None else started_at
        return ToolCall(TOOL, tool_input, session_id=session, started_at=started)

    def decide(self, *vms: str, **kwargs: Any) -> Any:
        """The guard's decision on a call on ``vms`` made now."""
        guard = self.guard()
        consume = kwargs.pop("consume", True)
        return guard.decide(self.call(*vms, **kwargs), consume=consume)


# ---------------------------------------------------------------- several sites

HQ_ESTATE, DR_ESTATE = PAIRED_ESTATES["hq"], PAIRED_ESTATES["dr"]


def share_journals(backends: list[Backend]) -> None:
    """One journal per VPG, as in Zerto: a VPG two sites' files both hold (same identifier)
    gets the first backend's journal in every other, so a tag one ZVM takes is in the
    listing of the other (which the guard's second-witness check reads)."""
    first: dict[str, Any] = {}
    for backend in backends:
        for vpg_id, vpg in backend.world.vpgs.items():
            vpg.journal = first.setdefault(vpg_id, vpg.journal)


class EstateRig:
    """A guard over several simulated ZVMs (one backend each), a state directory, a clock."""

    def __init__(
        self, tmp_path: Path, estates: dict[str, dict[str, Any]] | None = None, **guard: Any
    ) -> None:
        estates = estates or {"hq": HQ_ESTATE, "dr": DR_ESTATE}
        self.clock = FakeClock(START_MONO, wall=START_WALL)
        self.zvms: dict[str, SimZvm] = {}
        for site, estate in estates.items():
            path = tmp_path / f"estate-{site}.json"
            path.write_text(json.dumps(estate))
            backend = make_backend(self.clock, estate_file=path)
            self.zvms[site] = SimZvm(backend, url=f"https://{site}.zvm.test")
        share_journals([z.backend for z in self.zvms.values()])
        self.settings = make_settings(tmp_path, sites=list(estates), **guard)
        self.state = HookedState(self.settings.state_dir)

    def guard(self) -> Guard:
        return clocked_guard(self.settings, self.state, self.clock, clients=self.zvms)

    def decide(self, *vms: str, tool: str = TOOL, session: str = "s1") -> Any:
        tool_input: dict[str, Any] = {"name": vms[0]} if len(vms) == 1 else {"names": list(vms)}
        if not vms:
            tool_input = {}
        call = ToolCall(tool, tool_input, session_id=session, started_at=self.clock.wall())
        return self.guard().decide(call)

    def tags(self, site: str) -> list[str]:
        """The VPGs that site's ZVM was asked to tag, in order."""
        return [c.removeprefix("tag ") for c in self.zvms[site].calls if c.startswith("tag ")]


def rig_with(tmp_path: Path, tools: dict[str, Any], **top: Any) -> Rig:
    """A rig whose catalog is ``tools`` (plus the usual power_off) and top-level ``top``."""
    rig = Rig(tmp_path, timeout_s=20.0)
    config = {
        "zvm": {"url": URL, "username": "u", "password": "p"},
        "tools": {TOOL: {"vm_arg": ["name", "names[]"]}, **tools},
        "guard": {"timeout_s": 20.0},
        "state_dir": str(tmp_path / "state"),
        **top,
    }
    rig.settings = load_written_settings(tmp_path, config, name="tools.json")
    return rig


def decide(rig: Rig, tool: str, tool_input: Any) -> Any:
    """The rig's guard's decision on ``tool`` called with ``tool_input`` (session s1)."""
    return rig.guard().decide(
        ToolCall(tool, tool_input, session_id="s1", started_at=rig.clock.wall())
    )
