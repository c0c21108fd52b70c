"""The route table: method + path regex → stable route name → handler name.

Paths match case-insensitively, as ZVM's ASP.NET routing does. Faults and stats
refer to routes by name. Specific paths come before ``{id}`` patterns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ID = r"(?P<{}>[^/]+)"


@dataclass(frozen=True)
class Route:
    """One route; ``kind`` is ``auth``, ``api`` (bearer token) or ``control``."""

    name: str
    method: str
    pattern: re.Pattern[str]
    handler: str
    kind: str


def _route(name: str, method: str, path: str, handler: str, kind: str = "api") -> Route:
    regex = path.format(
        vpg_id=_ID.format("vpg_id"),
        vm_id=_ID.format("vm_id"),
        task_id=_ID.format("task_id"),
        name=_ID.format("name"),
    )
    return Route(name, method, re.compile(f"^{regex}/?$", re.IGNORECASE), handler, kind)


_VPG = "/v1/vpgs/{vpg_id}"
_VM = "/v1/vms/{vm_id}"
_SIM_VPG = "/_sim/vpgs/{name}"

ROUTES: tuple[Route, ...] = (
    _route("tokens", "POST", "/auth/realms/zerto/protocol/openid-connect/token", "token", "auth"),
    _route("localsite", "GET", "/v1/localsite", "local_site"),
    _route("peersites", "GET", "/v1/peersites", "peer_sites"),
    _route("vms.list", "GET", "/v1/vms", "vms_list"),
    _route("vms.restore", "POST", f"{_VM}/Restore", "vm_restore"),
    _route("vms.restore_commit", "POST", f"{_VM}/RestoreCommit", "vm_restore_commit"),
    _route("vms.restore_rollback", "POST", f"{_VM}/RestoreRollback", "vm_restore_rollback"),
    _route("vms.get", "GET", _VM, "vms_get"),
    _route("vpgs.statuses", "GET", "/v1/vpgs/statuses", "vpg_statuses"),
    _route("vpgs.substatuses", "GET", "/v1/vpgs/substatuses", "vpg_substatuses"),
    _route("vpgs.entitytypes", "GET", "/v1/vpgs/entitytypes", "vpg_entitytypes"),
    _route("vpgs.list", "GET", "/v1/vpgs", "vpgs_list"),
    _route("vpgs.get", "GET", _VPG, "vpgs_get"),
    _route("checkpoints.stats", "GET", f"{_VPG}/checkpoints/stats", "checkpoints_stats"),
    _route("checkpoints.list", "GET", f"{_VPG}/checkpoints", "checkpoints_list"),
    _route("checkpoints.tag", "POST", f"{_VPG}/checkpoints", "checkpoints_tag"),
    _route("vpgs.failover_test", "POST", f"{_VPG}/FailoverTest", "failover_test"),
    _route("vpgs.failover_test_stop", "POST", f"{_VPG}/FailoverTestStop", "failover_test_stop"),
    _route("vpgs.failover", "POST", f"{_VPG}/Failover", "failover"),
    _route("vpgs.failover_commit", "POST", f"{_VPG}/FailoverCommit", "failover_commit"),
    _route("vpgs.failover_rollback", "POST", f"{_VPG}/FailoverRollback", "failover_rollback"),
    _route("tasks.list", "GET", "/v1/tasks", "tasks_list"),
    _route("tasks.get", "GET", "/v1/tasks/{task_id}", "tasks_get"),
    _route("sim.reset", "POST", "/_sim/reset", "reset", "control"),
    _route("sim.stats", "GET", "/_sim/stats", "stats", "control"),
    _route("sim.faults.set", "POST", "/_sim/faults", "faults_set", "control"),
    _route("sim.faults.list", "GET", "/_sim/faults", "faults_list", "control"),
    _route("sim.faults.clear", "DELETE", "/_sim/faults", "faults_clear", "control"),
    _route("sim.tokens.expire", "POST", "/_sim/tokens/expire", "tokens_expire", "control"),
    _route("sim.tag_behaviour", "POST", f"{_SIM_VPG}/tag-behaviour", "tag_behaviour", "control"),
    _route("sim.vpg_status", "POST", f"{_SIM_VPG}/status", "vpg_status", "control"),
    _route("sim.vpg_cadence", "POST", f"{_SIM_VPG}/cadence", "vpg_cadence", "control"),
    _route("sim.vm_actions.add", "POST", "/_sim/vm-actions", "vm_actions_add", "control"),
    _route("sim.vm_actions.list", "GET", "/_sim/vm-actions", "vm_actions_list", "control"),
    _route("sim.vcenter", "GET", "/_sim/vcenter", "vcenter", "control"),
)

ROUTE_NAMES = frozenset(route.name for route in ROUTES)


@dataclass(frozen=True)
class Resolved:
    """The outcome of matching a request: a route, or the status to answer with."""

    route: Route | None
    params: dict[str, str]
    status: int = 200
    allow: tuple[str, ...] = ()


def resolve(method: str, path: str) -> Resolved:
    """Match a request; 404 for an unknown path, 405 (with Allow) for a wrong method."""
    allow: list[str] = []
    for route in ROUTES:
        found = route.pattern.match(path)
        if found is None:
            continue
        if route.method == method:
            return Resolved(route, found.groupdict())
        allow.append(route.method)
    if allow:
        return Resolved(None, {}, 405, tuple(sorted(set(allow))))
    return Resolved(None, {}, 404)
