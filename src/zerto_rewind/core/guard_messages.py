"""The guard's messages: what the person approving (and the model) reads for each row.

Kept apart from the rules in :mod:`.guard`, so a maintainer changes a rule in one
module and its words in another. Every function here is pure: facts in, text or a
:class:`~.decision.Decision` out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .decision import Decision, Outcome, Row, ToolCall, VmIdentity, VpgOutcome, fmt_time

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..errors import ZertoRewindError
    from .catalog import Classification

__all__ = [
    "ambiguous_decision",
    "checkpoint_context",
    "deny_decision",
    "error_reason",
    "failed_reason",
    "host_path_decision",
    "identity_unverified",
    "no_vm_decision",
    "pending_reason",
]


def deny_decision(call: ToolCall, row: str, reason: str, vms: tuple[str, ...]) -> Decision:
    return Decision(row, Outcome.DENY, call.tool_name, reason=reason, vms=vms)


def ambiguous_decision(
    call: ToolCall,
    vms: tuple[str, ...],
    ambiguous: dict[str, list[VmIdentity]],
    zvms: str,
) -> Decision:
    """Zerto lists several VMs of one name: the guard cannot tell which one the server changes."""
    parts = [
        f"{vm!r} ({len(ids)} VMs: {', '.join(i.vm_id for i in ids)})"
        for vm, ids in ambiguous.items()
    ]
    reason = (
        f"zerto-rewind cannot tell which VM {call.tool_name} changes: Zerto ({zvms}) lists "
        f"several VMs of the name {', '.join(parts)} (vCenter allows one name in several "
        "folders), and the VM server picks one by itself. No checkpoint was made. Approve only "
        "if you know which VM the call changes and accept it without a rewind point; an "
        "operator can rename one of the VMs so each name is unique."
    )
    return Decision(Row.VM_AMBIGUOUS, Outcome.PROMPT, call.tool_name, reason=reason, vms=vms)


def error_reason(
    call: ToolCall, vms: tuple[str, ...], exc: ZertoRewindError, where: str | None = None
) -> str:
    target = f" on {', '.join(vms)}" if vms else ""
    source = f"{where} failed: " if where else ""
    return (
        f"zerto-rewind denied {call.tool_name}{target}: no checkpoint could be confirmed because "
        f"{source}{type(exc).__name__}: {exc}. The call was not run. An operator can look into "
        "it with `zerto-rewind doctor`; retry the same call once it is resolved."
    )


def no_vm_decision(call: ToolCall, verdict: Classification) -> Decision:
    """Nothing can be checkpointed: the tool's own ``decision`` (default prompt)."""
    spec = verdict.spec
    choice = (spec.decision if spec is not None else None) or "prompt"
    entry = verdict.entry or call.tool_name
    if choice == "allow":  # the parser allows it only for tools that name no existing VM
        reason = (
            f"zerto-rewind allowed {call.tool_name} without a checkpoint: the catalog entry "
            f"{entry!r} says it changes no existing VM (decision: allow)."
        )
        return Decision(Row.NO_VM, Outcome.NONE, call.tool_name, reason=reason)
    configurable = (
        "an operator can configure which VPGs it affects or a per-tool policy"
        if spec is not None and not spec.vm_arg
        else "an operator can check where the guard's catalog looks for this tool's VM"
    )
    if choice == "deny":
        reason = (
            f"zerto-rewind denied {call.tool_name}: it cannot tell which VM the call changes "
            f"({verdict.problem}), so no rewind point can be made, and the catalog's policy for "
            f"this tool is to deny such calls. The call was not run; {configurable}."
        )
        return Decision(Row.NO_VM, Outcome.DENY, call.tool_name, reason=reason)
    reason = (
        f"zerto-rewind cannot tell which VM {call.tool_name} changes ({verdict.problem}); "
        "no checkpoint was made. Approve only if you accept a change with no rewind point; "
        f"{configurable}."
    )
    return Decision(Row.NO_VM, Outcome.PROMPT, call.tool_name, reason=reason)


def host_path_decision(call: ToolCall, verdict: Classification) -> Decision:
    """The call names a file on the VM server's host: a person decides, checkpoint or not.

    The reason names the arguments, never their values (it is logged); the values
    ride in ``Decision.host_paths`` for the person who approves.
    """
    spec = verdict.spec
    names = ", ".join(verdict.host_paths)
    label = "argument" if len(verdict.host_paths) == 1 else "arguments"
    touches = (
        f"reads or writes a file on the machine where the VM server runs ({label} {names}), "
        "with the rights of the guard service that runs that server"
    )
    if spec is not None and spec.decision == "deny":
        reason = (
            f"zerto-rewind denied {call.tool_name}: it {touches}. No checkpoint can rewind "
            "that, and the catalog's policy for this tool is to deny such calls. The call was "
            "not run."
        )
        outcome = Outcome.DENY
    else:
        reason = (
            f"zerto-rewind: {call.tool_name} {touches}; no Zerto checkpoint can rewind that, so "
            f"none was made. Approve only if you have checked the path in {names} and the call "
            "may touch it."
        )
        outcome = Outcome.PROMPT
    return Decision(
        Row.HOST_PATH,
        outcome,
        call.tool_name,
        reason=reason,
        vms=verdict.vms,
        host_paths=dict(verdict.host_paths),
    )


def failed_reason(call: ToolCall, failed: list[VpgOutcome]) -> str:
    parts = [
        f"VPG {o.vpg_name!r} ({', '.join(o.vms) or 'named by the catalog'}): {o.reason}"
        for o in failed
    ]
    return (
        f"zerto-rewind denied {call.tool_name}: no rewind point could be made, so the call was not "
        f"run. {' '.join(parts)}"
    )


def pending_reason(
    call: ToolCall, pending: list[VpgOutcome], retry_after: float, settings: Settings
) -> str:
    parts = []
    for o in pending:
        cadence = f"~{o.cadence_s:.0f} s ({o.cadence_source})" if o.cadence_s else "unknown"
        parts.append(
            f"tag {o.tag!r} was requested at {fmt_time(o.requested_at or 0)} on VPG {o.vpg_name!r} "
            f"({o.site_kind}-protected, journal cadence {cadence}) and is expected in the "
            f"journal by {fmt_time(o.expected_at or 0)}."
        )
    budget = settings.guard.timeout_s
    return (
        f"zerto-rewind: checkpoint pending for {call.tool_name}, so the call was not run yet. "
        f"{' '.join(parts)} That is beyond this guard's {budget:.0f} s budget. Retry the same call "
        f"after {fmt_time(retry_after)}: the retry finds the landed checkpoint and is allowed "
        "without a new tag."
    )


def checkpoint_context(
    call: ToolCall, outcomes: list[VpgOutcome], rewind_tool: str | None = None
) -> str:
    import shlex  # the rewind command is written for a shell

    lines = [f"zerto-rewind: a Zerto checkpoint protects this {call.tool_name} call."]
    for o in outcomes:
        landed = fmt_time(o.landed_at) if o.landed_at else "unknown time"
        kind = f"{o.site_kind}, site {o.site}" if o.site else o.site_kind
        if not o.vms:  # a VPG the catalog names for this tool
            lines.append(
                f"- VPG {o.vpg_name!r} ({kind}): checkpoint {o.checkpoint_id} tagged "
                f"{o.tag!r} at {landed}. To rewind: recover VPG {o.vpg_name!r} to checkpoint "
                f"{o.checkpoint_id!r} (Zerto failover test or failover)."
            )
            continue
        vm = o.vms[0]
        if rewind_tool:
            how = (
                f"the MCP tool {rewind_tool}(vm={vm!r}, checkpoint={o.checkpoint_id!r}) "
                "lists the ways back"
            )
        else:
            how = (
                f"`zerto-rewind checkpoints {vm} --tagged` lists the tagged checkpoints; then "
                f"recover VPG {o.vpg_name!r} to checkpoint {o.checkpoint_id!r} (Zerto failover "
                "test or failover)"
            )
            if o.landed_at:  # the command that puts this VM back as it was before this call
                how = (
                    f"a person runs `zerto-rewind rewind --vm {shlex.quote(vm)} --before "
                    f"{landed} --dry-run` to see the plan that restores {vm!r} to checkpoint "
                    f"{o.checkpoint_id!r} (a Zerto journal VM restore), then runs it without "
                    f"--dry-run; by hand, {how}"
                )
        lines.append(
            f"- VM {', '.join(o.vms)}: VPG {o.vpg_name!r} ({kind}), checkpoint "
            f"{o.checkpoint_id} tagged {o.tag!r} at {landed}. To rewind: {how}."
        )
    named = [vm for o in outcomes for vm in o.vms]
    if named and call.origin != "gateway":  # only the gateway can check (gateway/identity.py)
        lines.append(identity_unverified(named))
    return "\n".join(lines)


def identity_unverified(vms: Sequence[str]) -> str:
    """The checkpoint note's line for a call whose VM no identity check confirmed."""
    shown = ", ".join(repr(vm) for vm in dict.fromkeys(vms))
    return (
        f"- The VM's identity was not verified: the checkpoint covers the VM Zerto protects "
        f"as {shown}, found by name; the VM server looked the name up on its own, and if "
        "another VM has that name (in another folder, or renamed to it), that VM may be the "
        "one changed, with no checkpoint."
    )
