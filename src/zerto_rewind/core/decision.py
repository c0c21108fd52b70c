"""Host-neutral values of the guard: the call it judges and the decision it makes.

Rows are the situations of the decision table; outcomes are what the guard
wants done. Host adapters turn an outcome into their protocol (Claude Code:
nothing on stdout, ``additionalContext``, ``deny``, ``ask``, ``defer``).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .catalog import Classification

__all__ = [
    "Decision",
    "Outcome",
    "Row",
    "ToolCall",
    "VmIdentity",
    "VpgOutcome",
    "fmt_time",
    "pending_outcome",
    "shown_vm",
    "unlisted_outcome",
]


class Row:
    """The situation, one per row of the decision table."""

    READ_ONLY = "read_only"
    CONFIRMED = "confirmed"
    FAILED = "failed"
    PENDING = "pending"
    VM_UNKNOWN = "vm_unknown"
    VM_AMBIGUOUS = "vm_ambiguous"  # Zerto lists several VMs (identifiers) of that exact name
    VM_IDENTITY = "vm_identity"  # the gateway's identity check: the server means another VM
    SITE_UNKNOWN = "site_unknown"  # found on some sites while another site did not answer
    NO_VM = "no_vm"
    UNLISTED = "unlisted"
    CONFIG_ERROR = "config_error"
    ERROR = "error"
    PROTECTED = "protected"  # a host file/shell call that would write the guard's own files
    HOST_PATH = "host_path"  # a VM tool that reads or writes a file on the VM server's host
    UNDECIDED = "undecided"  # no step of the pipeline decided (core.pipeline): a deny
    # The last identical call's outcome is unknown (core.execute_once): a person checks first.
    OUTCOME_UNKNOWN = "outcome_unknown"


class Outcome:
    """What the guard wants the host to do."""

    NONE = "none"  # let the call run, say nothing
    CONTEXT = "context"  # let it run, tell the model which checkpoint protects it
    DENY = "deny"
    PROMPT = "prompt"  # a human decides; adapters map it to what is safe on their host
    DEFER = "defer"  # pause a headless run; resume re-asks the guard


# Most restrictive first: combining several VPGs keeps the worst.
SEVERITY = {
    Row.FAILED: 4,
    Row.ERROR: 4,
    Row.PENDING: 3,
    Row.VM_UNKNOWN: 2,
    Row.VM_AMBIGUOUS: 2,
    Row.SITE_UNKNOWN: 2,
    Row.CONFIRMED: 1,
}


def pending_outcome(on_pending: str) -> str:
    """The outcome of the pending row under ``guard.on_pending`` (prompt, defer, else deny)."""
    return {"prompt": Outcome.PROMPT, "defer": Outcome.DEFER}.get(on_pending, Outcome.DENY)


def unlisted_outcome(unknown: str) -> str:
    """The outcome of the unlisted row under the catalog's ``unknown_tools`` rule."""
    return {"allow": Outcome.NONE, "deny": Outcome.DENY}.get(unknown, Outcome.PROMPT)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as a host reported it."""

    tool_name: str
    tool_input: Any
    session_id: str | None = None
    tool_use_id: str | None = None
    origin: str = "hook"  # hook | mcp | demo
    started_at: float = field(default_factory=time.time)
    # Who asks (``unix:USER``, a token's name, ``hook:USER``) and through which MCP client;
    # the approvals step keys an approval on the principal.
    principal: str | None = None
    host: str | None = None

    @cached_property
    def args_digest(self) -> str:
        """The arguments' digest (:func:`arguments_digest`), computed once per call:
        a call of large arguments pays for its canonical JSON once, not per step."""
        return arguments_digest(self.tool_input)


def arguments_digest(tool_input: Any) -> str:
    """SHA-256 of the canonical JSON of a call's arguments (sorted keys, no spaces)."""
    body = json.dumps(
        tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(frozen=True)
class VmIdentity:
    """The VM Zerto means by a name: its identifiers, for the gateway's identity check."""

    vm_id: str  # VmIdentifier, ``<server id>.vm-42``
    instance_id: str | None = None  # Link.instance_identifier (UNCONFIRMED content)


@dataclass
class VpgOutcome:
    """What happened on one VPG for this call."""

    vpg_id: str
    vpg_name: str
    vms: tuple[str, ...]
    site_kind: str = "unknown"
    row: str = Row.CONFIRMED
    tag: str | None = None
    checkpoint_id: str | None = None
    requested_at: float | None = None
    expected_at: float | None = None
    landed_at: float | None = None
    cadence_s: float | None = None
    cadence_source: str | None = None
    new_tag: bool = False
    reason: str = ""
    bounded: bool = False  # refused: guard.max_tags_per_minute reached on this VPG
    site: str | None = None  # the estate's site whose ZVM takes the tag (several ZVMs only)


@dataclass(frozen=True)
class Decision:
    """The guard's answer for one call: immutable once made.

    A step that changes the answer (an approval, the identity check) makes a new
    one with :meth:`but` (``dataclasses.replace``); the one it was given stays as
    the step before it left it.
    """

    row: str
    outcome: str
    tool_name: str
    reason: str = ""
    context: str = ""
    vms: tuple[str, ...] = ()
    vpgs: list[VpgOutcome] = field(default_factory=list)
    retry_after: float | None = None
    elapsed_ms: int = 0
    # host_path row: argument -> the path it names. Shown to the person who approves,
    # never logged (log_record leaves it out; the reason names the argument only).
    host_paths: dict[str, str] = field(default_factory=dict)

    # VM name -> the VM Zerto's record means; set on a confirmed decision.
    identities: dict[str, VmIdentity] = field(default_factory=dict)
    # VM name -> the name as the call gave it (before vm_map). Neither is logged.
    vm_args: dict[str, str] = field(default_factory=dict)
    # The catalog's word on the call, made once (core.pipeline); steps read it, never redo it.
    classification: Classification | None = field(default=None, repr=False, compare=False)
    # The approvals step: what became of the request (approved, waiting, no_approver,
    # capped, approvals_down…), the request, and the reason the approver was asked with.
    answer: str | None = None
    # An approvals.ApprovalRequest (typed loosely: approvals imports this module).
    approval: Any = field(default=None, repr=False, compare=False)
    asked: str = ""

    def but(self, **changes: Any) -> Decision:
        """A copy of this decision with ``changes`` (the fields of ``dataclasses.replace``)."""
        return replace(self, **changes)

    def for_approver(self) -> str:
        """The reason, plus the host paths the call names: for a person's eyes, not a log."""
        if not self.host_paths:
            return self.reason
        shown = "; ".join(f"{arg} = {value!r}" for arg, value in self.host_paths.items())
        return f"{self.reason} The call names: {shown}."

    @property
    def vpg_names(self) -> list[str]:
        """The VPGs the decision covers, by name: what its log lines and trace name."""
        return [v.vpg_name for v in self.vpgs]

    @property
    def checkpoint_ids(self) -> list[str]:
        """The checkpoints the decision's VPGs hold (those that have one)."""
        return [v.checkpoint_id for v in self.vpgs if v.checkpoint_id]

    def log_record(self, call: ToolCall) -> dict[str, Any]:
        """The decision-log line: ids, names, times; never an argument value but VM names."""
        return {
            "time": fmt_time(time.time()),
            "origin": call.origin,
            "session_id": call.session_id,
            "tool_use_id": call.tool_use_id,
            "tool": self.tool_name,
            "row": self.row,
            "decision": self.outcome,
            "vms": list(self.vms),
            "vpgs": self.vpg_names,
            "vpg_ids": [v.vpg_id for v in self.vpgs],
            "site_types": [v.site_kind for v in self.vpgs],
            "checkpoint_ids": self.checkpoint_ids,
            "tags": [v.tag for v in self.vpgs if v.tag],
            "requested_at": _first_time(v.requested_at for v in self.vpgs),
            "expected_at": _first_time(v.expected_at for v in self.vpgs),
            "landed_at": _first_time(v.landed_at for v in self.vpgs),
            "retry_after": fmt_time(self.retry_after) if self.retry_after else None,
            "elapsed_ms": self.elapsed_ms,
            "reason": self.reason,
            **({"tag_bound": bounded} if (bounded := self._bounded()) else {}),
            **({"sites": sites} if any(sites := [v.site for v in self.vpgs]) else {}),
        }

    def _bounded(self) -> list[str]:
        return [v.vpg_name for v in self.vpgs if v.bounded]


def shown_vm(name: str) -> str:
    """A VM name for a person to read: quoted and escaped when it hides something.

    ``web-01`` + NBSP, or a leading space, is another VM to vCenter; printed bare it
    would look like the protected one to the approver.
    """
    if name.isprintable() and name.strip() == name and name:
        return name
    return ascii(name)


def fmt_time(epoch: float) -> str:
    """ISO-8601 UTC with milliseconds and a ``Z``."""
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _first_time(values: Any) -> str | None:
    for value in values:
        if value:
            return fmt_time(value)
    return None
