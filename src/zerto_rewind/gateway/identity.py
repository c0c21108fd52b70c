"""The identity check: does the VM server mean the VM Zerto checkpointed?

The guard finds a VM's VPG by its name in Zerto; the VM server (mcvsphere and
others) finds the VM by the same name in vCenter, on its own. When the two are
different VMs (a twin in another folder, a rename, a name Zerto knows from
another vCenter), the checkpoint protects the wrong VM. So before a call the
guard confirmed is forwarded, the gateway asks the server's read-only resolver
tool (``catalog.resolvers.<server>``) which VM the name means, and compares the
vCenter identity it answers with the one in Zerto's VM record, whole: the vCenter
and the moref (a moref is unique only within one vCenter), or the instance UUID.

One resolver call per confirmed decision, at most. Every failure (the resolver
errs, times out, answers without the identity, or names another VM) turns the
decision into a prompt: the call runs only if a person approves it.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from ..core.catalog import READ_ONLY, classify
from ..core.decision import Decision, Outcome, Row, VmIdentity
from ..errors import ConfigError
from .upstream import UpstreamError

if TYPE_CHECKING:
    import mcp_types as types

    from ..config.settings import CatalogSettings, ResolverSpec
    from .upstream import Upstream

__all__ = ["check_identity", "resolver_identity", "zerto_identity"]

log = logging.getLogger("zerto_rewind.gateway")


async def check_identity(
    catalog: CatalogSettings, upstream: Upstream, decision: Decision
) -> Decision:
    """The decision to act on: ``decision`` itself, or a prompt saying what failed.

    Unchanged when no resolver is configured for this server, the decision is
    not a confirmed checkpoint, or the call names no VM (a host-level tool).
    """
    resolver = catalog.resolvers.get(upstream.name)
    if resolver is None or decision.outcome != Outcome.CONTEXT or not decision.vms:
        return decision
    if len(decision.vms) > 1:
        why = (
            f"the call names {len(decision.vms)} VMs and the identity check confirms one VM "
            "per call"
        )
        return _prompt(decision, why)
    vm = decision.vms[0]
    expected = zerto_identity(decision.identities.get(vm), resolver)
    if expected is None:
        record = decision.identities.get(vm)
        shown = record.vm_id if record is not None else "no record"
        why = (
            f"Zerto's record of {vm!r} ({shown}) holds no vCenter identity in "
            f"{resolver.zerto_field} matching catalog.resolvers.{upstream.name}.zerto_pattern"
        )
        return _prompt(decision, why)
    tool = f"mcp__{upstream.name}__{resolver.tool}"
    try:
        kind = classify(tool, {}, catalog).kind
    except ConfigError:
        kind = "error"
    if kind != READ_ONLY:
        why = f"the resolver {resolver.tool!r} is not a read-only tool in the catalog"
        return _prompt(decision, why)
    argument = decision.vm_args.get(vm, vm)
    try:
        result = await upstream.call_tool(
            resolver.tool, {resolver.arg: argument}, resolver.timeout_s
        )
    except UpstreamError as exc:
        log.warning("identity check on %s failed: %s", upstream.name, type(exc).__name__)
        return _prompt(decision, f"its resolver {resolver.tool!r} failed ({exc})")
    if result.is_error:
        why = f"its resolver {resolver.tool!r} answered with an error (it may not know {vm!r})"
        return _prompt(decision, why)
    found = resolver_identity(result, resolver.id_path)
    if found is None:
        why = f"its resolver {resolver.tool!r} answered without a value at {resolver.id_path!r}"
        return _prompt(decision, why)
    why = _differs(vm, expected, _found_whole(found, result, resolver), resolver, upstream.name)
    return _prompt(decision, why) if why else decision


def _found_whole(
    found: str, result: types.CallToolResult, resolver: ResolverSpec
) -> tuple[str, str | None]:
    """The VM server's (identity, vCenter): a whole Zerto-style identifier in the answer is
    taken apart as Zerto's is; else the vCenter at ``vcenter_path``, else ``vcenter``."""
    whole = _groups(resolver.zerto_pattern, found)
    if whole is not None and whole[1] is not None:
        return whole
    if resolver.vcenter_path is not None:
        return found, resolver_identity(result, resolver.vcenter_path)
    return found, resolver.vcenter


def _differs(
    vm: str,
    expected: tuple[str, str | None],
    found: tuple[str, str | None],
    resolver: ResolverSpec,
    server: str,
) -> str:
    """Why the two identities are not one VM ("" when they are). A moref is unique only
    within one vCenter, so a ``vm_identifier`` is compared whole: vCenter and moref."""
    (want, want_vc), (got, got_vc) = expected, found
    whole = resolver.zerto_field == "vm_identifier" or want_vc is not None
    key = f"catalog.resolvers.{server}"
    if whole and want_vc is None:
        return (
            f"{key}.zerto_pattern has no group (?P<vcenter>...), and a moref alone "
            f"({want}) may be a VM of any vCenter"
        )
    if whole and got_vc is None:
        source = (
            f"its resolver {resolver.tool!r} answered without a value at {resolver.vcenter_path!r}"
            if resolver.vcenter_path is not None
            else f"{key} names no vCenter (vcenter or vcenter_path)"
        )
        return f"{source}, and a moref alone ({got}) may be a VM of any vCenter"
    if got != want or (whole and got_vc != want_vc):
        shown_got = f"{got} in vCenter {got_vc}" if whole else got
        shown_want = f"{want} in vCenter {want_vc}" if whole else want
        return (
            f"the VM server's {vm!r} is {shown_got}, but the VM Zerto protects under that "
            f"name is {shown_want}: they are different VMs"
        )
    return ""


def zerto_identity(
    identity: VmIdentity | None, resolver: ResolverSpec
) -> tuple[str, str | None] | None:
    """Groups ``id`` and ``vcenter`` (None if the pattern has none) of the resolver's
    ``zerto_pattern`` on Zerto's chosen field, or None."""
    if identity is None:
        return None
    value = (
        identity.instance_id if resolver.zerto_field == "instance_identifier" else identity.vm_id
    )
    return _groups(resolver.zerto_pattern, value) if value else None


def _groups(pattern: str, value: str) -> tuple[str, str | None] | None:
    match = re.search(pattern, value)
    if match is None or not match.group("id"):
        return None
    vcenter = match.groupdict().get("vcenter")
    return match.group("id"), vcenter or None


def resolver_identity(result: types.CallToolResult, id_path: str) -> str | None:
    """The value at ``id_path`` of the resolver's answer (structured, else JSON text)."""
    candidates: list[Any] = []
    structured = result.structured_content
    if isinstance(structured, dict):
        candidates.append(structured)
        if isinstance(structured.get("result"), dict):  # FastMCP wraps some returns
            candidates.append(structured["result"])
    for block in result.content:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            try:
                candidates.append(json.loads(text))
            except ValueError:
                continue
    for candidate in candidates:
        value = _at(candidate, id_path)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return str(value)
    return None


def _at(node: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _prompt(decision: Decision, why: str) -> Decision:
    checkpoints = ", ".join(
        f"VPG {o.vpg_name!r} checkpoint {o.checkpoint_id}" for o in decision.vpgs if o.checkpoint_id
    )
    made = f" A checkpoint was made for Zerto's VM ({checkpoints})." if checkpoints else ""
    reason = (
        f"zerto-rewind cannot confirm that {decision.tool_name} changes the VM Zerto protects: "
        f"{why}.{made} Approve only if you know which VM the call changes; an operator can "
        "check the VM's name in vCenter and Zerto, and the gateway's catalog.resolvers."
    )
    return Decision(
        Row.VM_IDENTITY,
        Outcome.PROMPT,
        decision.tool_name,
        reason=reason,
        vms=decision.vms,
        vpgs=decision.vpgs,
        identities=decision.identities,
        vm_args=decision.vm_args,
    )
