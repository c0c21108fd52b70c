"""The control plane under ``/_sim/``: exists only in the simulator, needs no token.

Every route acts on the ZVM whose port received it, or on ``?site=NAME``'s. VPG
routes and the VM-action record are the estate's, shared by all its ZVMs.
"""

from __future__ import annotations

from typing import Any

from zerto_rewind.sim.errors import bad_request
from zerto_rewind.sim.faults import CONNECTION_KINDS, parse_fault
from zerto_rewind.sim.handlers import Context, Request, Response
from zerto_rewind.sim.models import TagBehaviour, Vpg
from zerto_rewind.sim.state import TAG_TASK_FAILURE

_MODES = ("normal", "late", "never", "fail")


def _vpg(ctx: Context, req: Request) -> Vpg:
    return ctx.backend.vpg_named(req.params["name"])


def _number(body: dict[str, Any], key: str, default: float | None = None) -> float:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{key} must be a number"
        raise bad_request(msg)
    return float(value)


def reset(ctx: Context, req: Request) -> Response:
    """POST /_sim/reset: fresh estate; faults, counters and tasks of every ZVM cleared."""
    for site in ctx.sites.values() or [ctx]:
        site.faults.clear()
    ctx.backend.reset()
    return Response(body={"reset": True})


def stats(ctx: Context, req: Request) -> Response:
    """GET /_sim/stats: counters."""
    return Response(body=ctx.backend.stats.to_json())


def faults_set(ctx: Context, req: Request) -> Response:
    """POST /_sim/faults: add a fault."""
    fault = parse_fault(req.json())
    if fault.kind in CONNECTION_KINDS:
        if req.via == ctx.name:
            # Its own control plane would be behind the fault, with no way to clear it.
            msg = f"set a {fault.kind} fault through another site's ZVM (?site={ctx.name})"
            raise bad_request(msg)
        if fault.kind == "wrong_cert" and not ctx.tls:
            msg = "wrong_cert needs TLS; this simulator serves plain HTTP"
            raise bad_request(msg)
    if fault.vpg is not None:
        ctx.backend.vpg_named(fault.vpg)  # an unknown name is 404, not a fault that never acts
    ctx.faults.add(fault)
    return Response(body=fault.to_json())


def faults_list(ctx: Context, req: Request) -> Response:
    """GET /_sim/faults: the active faults."""
    return Response(body=[f.to_json() for f in ctx.faults.faults])


def faults_clear(ctx: Context, req: Request) -> Response:
    """DELETE /_sim/faults: remove all faults, releasing hung requests."""
    ctx.faults.clear()
    return Response(body={"cleared": True})


def tokens_expire(ctx: Context, req: Request) -> Response:
    """POST /_sim/tokens/expire: every issued token stops working."""
    return Response(body={"expired": ctx.backend.tokens.expire_all()})


def tag_behaviour(ctx: Context, req: Request) -> Response:
    """POST /_sim/vpgs/{name}/tag-behaviour {"mode", "extra_delay_s", "count", "reason"}."""
    body = req.object()
    mode = body.get("mode", "normal")
    if mode not in _MODES:
        msg = f"mode must be one of {', '.join(_MODES)}"
        raise bad_request(msg)
    count = body.get("count", 1)
    if count is not None and (not isinstance(count, int) or count < 1):
        msg = "count must be a positive integer or null"
        raise bad_request(msg)
    reason = body.get("reason")
    if reason is not None and (not isinstance(reason, str) or not reason):
        msg = "reason must be a non-empty string"
        raise bad_request(msg)
    behaviour = TagBehaviour(mode, _number(body, "extra_delay_s", 0.0), count, reason)
    _vpg(ctx, req).tag_behaviour = behaviour
    answer = {"mode": mode, "extra_delay_s": behaviour.extra_delay_s, "count": count}
    if mode == "fail":
        answer["reason"] = reason or TAG_TASK_FAILURE
    return Response(body=answer)


def vpg_status(ctx: Context, req: Request) -> Response:
    """POST /_sim/vpgs/{name}/status {"status", "sub_status"}."""
    body = req.object()
    vpg = _vpg(ctx, req)
    status, sub = body.get("status", vpg.status), body.get("sub_status", 0)
    if not isinstance(status, int) or not isinstance(sub, int) or status < 0 or sub < 0:
        msg = "status and sub_status must be non-negative integers"
        raise bad_request(msg)
    ctx.backend.set_state(vpg, status, sub)
    return Response(body={"status": status, "sub_status": sub})


def vpg_cadence(ctx: Context, req: Request) -> Response:
    """POST /_sim/vpgs/{name}/cadence {"seconds"}: the cadence from now on."""
    seconds = _number(req.object(), "seconds")
    if seconds <= 0:
        msg = "seconds must be positive"
        raise bad_request(msg)
    _vpg(ctx, req).journal.set_cadence(seconds)
    return Response(body={"seconds": seconds})


def vm_actions_add(ctx: Context, req: Request) -> Response:
    """POST /_sim/vm-actions {"vm", "action", "tool"}: record a VM change."""
    body = req.object()
    if not isinstance(body.get("vm"), str) or not isinstance(body.get("action"), str):
        msg = "vm and action are required strings"
        raise bad_request(msg)
    record = {
        "vm": body["vm"],
        "action": body["action"],
        "tool": str(body.get("tool", "")),
        "at": ctx.backend.clock(),
    }
    ctx.backend.vm_actions.append(record)
    return Response(body=record)


def vm_actions_list(ctx: Context, req: Request) -> Response:
    """GET /_sim/vm-actions: every recorded VM change, oldest first."""
    return Response(body=list(ctx.backend.vm_actions))


def vcenter(ctx: Context, req: Request) -> Response:
    """GET /_sim/vcenter: the linked VMs, their latest kept state and the restores done."""
    replica = ctx.backend.world.replica
    return Response(body={"linked": False} if replica is None else replica.to_json())
