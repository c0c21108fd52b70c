"""The approval request and who answers it: the model both stores share.

A request names one exact call (the tool and the SHA-256 of its canonical
arguments) for one principal; it is pending until a person decides it, and an
approval is used once and never outlives the request's expiry. The stores
(``approvals_file``, ``approvals_redis``) keep requests; ``approvals`` holds the
policy that every door applies.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ZertoRewindError
from .approval_secrets import mask_secrets
from .decision import arguments_digest

__all__ = [
    "APPROVED",
    "DEFAULT_EXPIRES_S",
    "DEFAULT_MAX_OPEN",
    "DENIED",
    "EXPIRED",
    "PENDING",
    "RETENTION_S",
    "USED",
    "ApprovalError",
    "ApprovalLimitError",
    "ApprovalRequest",
    "Approver",
    "join_wait",
    "new_request",
]

PENDING, APPROVED, DENIED, EXPIRED, USED = "pending", "approved", "denied", "expired", "used"
DEFAULT_EXPIRES_S = 600.0
# Decided requests stay visible (page, `approvals list --all`) this long, then go.
RETENTION_S = 24 * 3600.0
# approvals.max_open_per_principal's default: open (live) requests one principal may hold.
DEFAULT_MAX_OPEN = 20
# Crockford's base32 without look-alikes: an id a person can read out and type.
_ID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class ApprovalError(ZertoRewindError):
    """An approval could not be given or recorded (unknown id, already decided, not allowed)."""


class ApprovalLimitError(ApprovalError):
    """A new request was refused: its principal (or the store) holds its cap of open ones."""

    def __init__(self, principal: str, cap: int, *, total: bool = False) -> None:
        self.principal, self.cap, self.total = principal, cap, total
        if total:
            text = f"the guard holds {cap} open approval requests, its limit for all callers"
        else:
            text = (
                f"{principal} already has {cap} open approval requests "
                f"(approvals.max_open_per_principal: {cap})"
            )
        super().__init__(text)

    def reason(self) -> str:
        """The refusal's ending, for the approver: what the cap is and what a person can do."""
        return (
            f"It needs a person's approval, and {self}, so no request was opened and the "
            "call was not run. An approver can answer or deny the waiting requests "
            "(`zerto-rewind approvals list`, or the approvals page); each also ends when "
            "it expires."
        )


@dataclass
class ApprovalRequest:
    """One call waiting for (or given) a human's decision."""

    id: str
    tool: str
    args_digest: str
    vms: list[str]
    row: str
    why: str
    principal: str
    created: float
    expires: float
    session: str | None = None
    host: str | None = None
    vpg_status: list[str] = field(default_factory=list)
    arguments: dict[str, str] = field(default_factory=dict)  # redacted: old requests only
    state: str = PENDING
    decided_by: str | None = None
    decided_at: float | None = None
    note: str | None = None
    used_at: float | None = None
    # The call's whole arguments, for the approver's eyes (core.approval_view); in the
    # service's state only, never in a log. None on requests made before they were kept.
    call_arguments: Any = None
    # Argument paths to mask (the tool's schema: writeOnly, format: password).
    secret_paths: list[str] = field(default_factory=list)
    # Argument paths that name files on the VM server's host (the catalog's host_paths).
    path_args: list[str] = field(default_factory=list)
    # When the caller stops waiting (the gateway's approvals.wait_s); None: it does not wait.
    wait_until: float | None = None

    def live(self, now: float) -> bool:
        """Pending, or approved and not yet used, and not expired."""
        return self.state in (PENDING, APPROVED) and now < self.expires

    def settle(self, now: float) -> bool:
        """Mark an expired pending or unused request ``expired``; True if it changed."""
        if self.state in (PENDING, APPROVED) and now >= self.expires:
            self.state = EXPIRED
            return True
        return False

    @property
    def done_at(self) -> float:
        """When it ended: used, else decided, else at its expiry."""
        return self.used_at or self.decided_at or self.expires

    def retired(self, now: float) -> bool:
        """Ended more than ``RETENTION_S`` ago: no store keeps it any longer."""
        return self.state not in (PENDING, APPROVED) and now - self.done_at > RETENTION_S

    def matches(self, principal: str, tool: str, digest: str) -> bool:
        return self.principal == principal and self.tool == tool and self.args_digest == digest

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> ApprovalRequest:
        known = {k: raw[k] for k in cls.__dataclass_fields__ if k in raw}
        return cls(**known)

    def summary(self) -> dict[str, Any]:
        """What ``approvals list --json`` prints for one request."""
        out: dict[str, Any] = {
            "id": self.id,
            "tool": self.tool,
            "vms": list(self.vms),
            "principal": self.principal,
            "state": self.state,
            "row": self.row,
            "digest": self.args_digest[:12],
        }
        if self.state == PENDING:  # a decided request is told by when and whom, not expiry
            out["expires"] = _iso(self.expires)
            out["caller_waits_until"] = _iso(self.wait_until) if self.wait_until else None
        else:
            out["decided_by"] = self.decided_by
            out["decided_at"] = _iso(self.decided_at) if self.decided_at else None
        return out


@dataclass(frozen=True)
class Approver:
    """Who is answering, as the channel authenticated them (never as the agent claims)."""

    kind: str  # "unix" (SO_PEERCRED on the approvals socket) | "web" (an approver login)
    name: str
    groups: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"


def new_request(
    *,
    tool: str,
    tool_input: Any,
    vms: Iterable[str],
    row: str,
    why: str,
    principal: str,
    expires_s: float = DEFAULT_EXPIRES_S,
    session: str | None = None,
    host: str | None = None,
    vpg_status: Iterable[str] = (),
    now: float | None = None,
    host_paths: Mapping[str, str] | None = None,
    secret_paths: Iterable[str] = (),
    wait_s: float | None = None,
    args_digest: str | None = None,
) -> ApprovalRequest:
    """A fresh pending request for one call (not yet stored), its whole arguments kept
    (secret-looking values as their masks: ``approval_view.mask_secrets``).

    ``host_paths``: the arguments that name files on the VM server's host (shown
    resolved too); ``secret_paths``: arguments masked for the approver;
    ``wait_s``: how long the caller waits for the decision (None: it does not);
    ``args_digest``: the arguments' digest, if the caller has it already.
    """
    now = time.time() if now is None else now
    vm_list = list(vms)
    wait_until = None if wait_s is None else now + min(wait_s, expires_s)
    secrets = list(secret_paths)
    return ApprovalRequest(
        id=_new_id(),
        tool=tool,
        args_digest=args_digest or arguments_digest(tool_input),
        vms=vm_list,
        row=row,
        why=why,
        principal=principal,
        created=now,
        expires=now + expires_s,
        session=session,
        host=host,
        vpg_status=list(vpg_status),
        call_arguments=mask_secrets(json.loads(json.dumps(tool_input, default=str)), secrets),
        secret_paths=secrets,
        path_args=list(host_paths or {}),
        wait_until=wait_until,
    )


def join_wait(request: ApprovalRequest, template: ApprovalRequest) -> bool:
    """A retry joins ``request`` and waits again: until when, later of the two; True if moved.

    So the approver is told the truth about a caller who is waiting now.
    """
    later = template.wait_until
    if request.state != PENDING or later is None:
        return False
    if request.wait_until is not None and request.wait_until >= later:
        return False
    request.wait_until = min(later, request.expires)
    return True


def _new_id() -> str:
    raw = secrets.token_bytes(8)
    chars = "".join(_ID_ALPHABET[b % 32] for b in raw)
    return f"{chars[:4]}-{chars[4:]}"


def _iso(epoch: float) -> str:
    from .decision import fmt_time

    return fmt_time(epoch)
