"""API handlers: parse the HTTP request, call the backend, shape the JSON answer.

Every handler is ``(ctx, request) -> Response`` and runs under the backend lock.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl

from zerto_rewind.sim import enums, recovery, views
from zerto_rewind.sim.errors import SimError, bad_request
from zerto_rewind.sim.faults import FaultTable, parted_view
from zerto_rewind.sim.models import Vpg
from zerto_rewind.sim.state import Backend
from zerto_rewind.sim.tasks import Task


@dataclass
class Request:
    """A parsed request; query keys are lowercased (ZVM's are case-insensitive)."""

    method: str
    path: str
    query: dict[str, str]
    body: bytes
    params: dict[str, str]
    base_url: str
    via: str = ""  # the ZVM site whose port received the request

    def json(self) -> Any:
        """The body as JSON (None when empty); 400 when it is not JSON."""
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            msg = "The request body is not valid JSON"
            raise bad_request(msg) from exc

    def fields(self) -> dict[str, Any]:
        """A JSON object body with lowercased keys (any casing is accepted)."""
        return {str(k).lower(): v for k, v in self.object().items()}

    def object(self) -> dict[str, Any]:
        """A JSON object body ({} when there is none); 400 for any other JSON."""
        body = self.json()
        if body is None:
            return {}
        if not isinstance(body, dict):
            msg = "The request body must be a JSON object"
            raise bad_request(msg)
        return body

    def form(self) -> dict[str, str]:
        """A form-encoded body."""
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))


@dataclass
class Response:
    """What to send: ``body`` is JSON-encoded unless ``raw`` is given."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None


@dataclass
class Context:
    """What handlers may touch: one ZVM's backend and faults.

    ``sites`` maps every ZVM site of the run (lowercased name) to its context, so
    the control plane can address another ZVM (``?site=NAME``) and reset them all.
    """

    backend: Backend
    faults: FaultTable
    name: str = ""
    sites: dict[str, Context] = field(default_factory=dict)
    tls: bool = True


Handler = Callable[[Context, Request], Response]


def parse_time(value: str, name: str) -> float:
    """Epoch milliseconds, or ISO-8601 (``Z``, offset or naive UTC; fractions optional)."""
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text) / 1000.0
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        msg = f"The value '{value}' is not valid for {name}."
        raise bad_request(msg) from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _task_id(task: Task) -> Response:
    # Write operations answer 200 with the task id as a bare JSON string.
    return Response(body=task.identifier)


def _vpg(ctx: Context, req: Request) -> Vpg:
    return ctx.backend.vpg(req.params["vpg_id"])


def token(ctx: Context, req: Request) -> Response:
    """Keycloak token endpoint."""
    form = req.form()
    ctx.backend.stats.token_requests[form.get("grant_type", "") or "(none)"] += 1
    return Response(body=ctx.backend.tokens.grant(form))


def local_site(ctx: Context, req: Request) -> Response:
    """GET /v1/localsite."""
    return Response(body=views.local_site(ctx.backend, req.base_url))


def peer_sites(ctx: Context, req: Request) -> Response:
    """GET /v1/peersites."""
    peers = ctx.backend.peers
    return Response(body=[views.peer_site(ctx.backend, req.base_url, p) for p in peers])


def vms_list(ctx: Context, req: Request) -> Response:
    """GET /v1/vms with vmName, vpgName, vmIdentifier filters."""
    q = req.query
    rows = ctx.backend.find_vms(q.get("vmname"), q.get("vpgname"), q.get("vmidentifier"))
    return Response(body=[views.vm(ctx.backend, req.base_url, vm, vpg) for vm, vpg in rows])


def vms_get(ctx: Context, req: Request) -> Response:
    """GET /v1/vms/{vmIdentifier}[?vpgIdentifier=]."""
    vm, vpg = ctx.backend.vm_row(req.params["vm_id"], req.query.get("vpgidentifier"))
    return Response(body=views.vm(ctx.backend, req.base_url, vm, vpg))


def vpgs_list(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs with the name filter."""
    name = req.query.get("name")
    backend = ctx.backend
    vpgs = backend.vpgs.values() if name is None else [backend.vpgs_by_name.get(name.lower())]
    return Response(body=[views.vpg(backend, req.base_url, v) for v in vpgs if v is not None])


def vpgs_get(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/{id}."""
    return Response(body=views.vpg(ctx.backend, req.base_url, _vpg(ctx, req)))


def vpg_statuses(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/statuses: index = value."""
    return Response(body=list(ctx.backend.status_names))


def vpg_substatuses(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/substatuses: index = value."""
    return Response(body=list(enums.SUB_STATUSES))


def vpg_entitytypes(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/entitytypes: index = value."""
    return Response(body=list(enums.ENTITY_TYPES))


def checkpoints_list(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/{id}/checkpoints[?startDate&endDate], oldest first."""
    vpg = _vpg(ctx, req)
    start, end = req.query.get("startdate"), req.query.get("enddate")
    # Half a millisecond of slack: checkpoint times are whole milliseconds, parsed
    # bounds are floats that may sit a hair to either side.
    found = ctx.backend.checkpoints(
        vpg,
        None if not start else parse_time(start, "startDate") - 0.0005,
        None if not end else parse_time(end, "endDate") + 0.0005,
    )
    parted = ctx.faults.journal_view(vpg.name)
    if parted is not None:  # this ZVM's view of the one journal parts from the others'
        found = parted_view(parted, found)
    return Response(body=[views.checkpoint(cp) for cp in found])


def checkpoints_stats(ctx: Context, req: Request) -> Response:
    """GET /v1/vpgs/{id}/checkpoints/stats."""
    journal = _vpg(ctx, req).journal
    earliest, latest = journal.earliest(), journal.latest()
    return Response(
        body={"Earliest": views.checkpoint(earliest), "Latest": views.checkpoint(latest)}
    )


def checkpoints_tag(ctx: Context, req: Request) -> Response:
    """POST /v1/vpgs/{id}/checkpoints {"checkpointName": ...} → task id."""
    vpg = _vpg(ctx, req)
    return _task_id(ctx.backend.tag(vpg, req.fields().get("checkpointname")))


def _vpg_operation(operation: Callable[[Backend, Vpg, dict[str, Any]], Task]) -> Handler:
    def handle(ctx: Context, req: Request) -> Response:
        return _task_id(operation(ctx.backend, _vpg(ctx, req), req.fields()))

    handle.__doc__ = operation.__doc__
    return handle


failover_test = _vpg_operation(recovery.failover_test)
failover_test_stop = _vpg_operation(recovery.failover_test_stop)
failover = _vpg_operation(recovery.failover)
failover_commit = _vpg_operation(recovery.failover_commit)
failover_rollback = _vpg_operation(recovery.failover_rollback)


def vm_restore(ctx: Context, req: Request) -> Response:
    """POST /v1/vms/{vmIdentifier}/Restore."""
    return _task_id(recovery.restore(ctx.backend, req.params["vm_id"], req.fields()))


def vm_restore_commit(ctx: Context, req: Request) -> Response:
    """POST /v1/vms/{vmIdentifier}/RestoreCommit with the VPG id as a JSON string."""
    vm_id = req.params["vm_id"]
    return _task_id(recovery.restore_end(ctx.backend, vm_id, req.json(), commit=True))


def vm_restore_rollback(ctx: Context, req: Request) -> Response:
    """POST /v1/vms/{vmIdentifier}/RestoreRollback with the VPG id as a JSON string."""
    vm_id = req.params["vm_id"]
    return _task_id(recovery.restore_end(ctx.backend, vm_id, req.json(), commit=False))


def tasks_list(ctx: Context, req: Request) -> Response:
    """GET /v1/tasks[?type=&status=]."""
    kind, state = req.query.get("type"), req.query.get("status")
    backend = ctx.backend
    tasks = [views.task(backend, req.base_url, t) for t in backend.tasks.tasks.values()]
    if kind:
        tasks = [t for t in tasks if t["Type"].lower() == kind.lower()]
    if state and state.isdigit():
        tasks = [t for t in tasks if t["Status"]["State"] == int(state)]
    return Response(body=tasks)


def tasks_get(ctx: Context, req: Request) -> Response:
    """GET /v1/tasks/{id}."""
    task = ctx.backend.task(req.params["task_id"])
    return Response(body=views.task(ctx.backend, req.base_url, task))


def error_response(error: SimError) -> Response:
    """A SimError as a response."""
    return Response(error.status, error.body)
