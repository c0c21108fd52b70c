"""Approval requests: a human's yes for one prompt-row call, held by the guard's owner.

A prompt row (VM unknown to Zerto, no VM in the arguments, an unlisted tool, or
a checkpoint that cannot be made) means that nothing can be rewound, so a person
decides. The question is not put to the agent's own session: the agent holds that
session's token and could answer it. Instead the guard service keeps an
:class:`ApprovalRequest` in its own state, and a person answers it on a channel
the agent cannot reach (the approvals socket, checked by ``SO_PEERCRED``; the
approvals page, with approver logins). See docs/approvals.md.

The rules, kept here so every door applies the same ones:

- a request names one exact call: the tool and the SHA-256 of its canonical
  arguments, for one principal (token name, unix user, host);
- an approval is used once (:meth:`ApprovalStore.consume`) and never outlives its
  request's expiry;
- :func:`refusal_to_approve` says who may not approve: anyone not listed as an
  approver, an agent's user, and the principal that asked.

Stores: :class:`FileApprovalStore` under the state directory (one JSON file per
request, one ``flock``), or ``approvals_redis.RedisApprovalStore`` for gateway
replicas; ``state_store.open_approvals`` picks, as it does for the guard state.
Both store each request with a MAC bound to its id (``record_mac``): a request
that does not verify is absent, so nobody without the guard's key approves one.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import StateError
from . import approvals_model, approvals_store
from .approvals_file import FileApprovalStore
from .approvals_log import log_event, record_event
from .approvals_model import *  # noqa: F403  # re-exported: approvals_model.__all__
from .approvals_model import ApprovalError, ApprovalRequest, Approver
from .approvals_store import *  # noqa: F403  # re-exported: approvals_store.__all__
from .decision import arguments_digest, fmt_time

__all__ = [
    "NO_APPROVER",
    "FileApprovalStore",
    "approved_context",
    "arguments_digest",
    "log_event",
    "record_event",
    "refusal_to_approve",
    "store_error",
    "waiting_reason",
]
__all__ += approvals_model.__all__
__all__ += approvals_store.__all__

NO_APPROVER = (
    "It needs a person's approval, and this guard has no approver configured "
    "(approvals.approvers). The call was not run."
)
# Crockford's base32 without look-alikes: an id a person can read out and type.


def refusal_to_approve(
    approver: Approver,
    request: ApprovalRequest | None,
    *,
    users: Iterable[str],
    groups: Iterable[str],
    agent_users: Iterable[str] = (),
    agent_principals: Iterable[str] = (),
) -> str | None:
    """Why ``approver`` may not answer (``request``, or any request when None); None if they may.

    A web approver was authenticated by an approver login, so ``users`` are the
    page's approver names; a unix approver must be listed by name or by group.
    Nobody who is an agent (an agent's unix user, a name that is also an agent
    token's) approves, and nobody approves a request they made themselves.
    """
    name = approver.name
    if name in set(agent_users) or approver.label in set(agent_principals):
        return f"{approver.label} is an agent's identity; agents cannot approve calls"
    if approver.kind == "web" and name in set(agent_principals):
        return f"{name} is also an agent token's name; agents cannot approve calls"
    listed = name in set(users) or bool(set(approver.groups) & set(groups))
    if not listed:
        return f"{approver.label} is not an approver (approvals.approvers)"
    if request is not None and _same_principal(approver, request.principal):
        return f"{approver.label} made this request; a request is approved by someone else"
    return None


def _same_principal(approver: Approver, principal: str) -> bool:
    kind, _, who = principal.partition(":")
    if approver.kind == "unix":
        return kind in ("unix", "stdio", "hook") and who == approver.name
    return principal == approver.name or principal == approver.label


def store_error(exc: BaseException) -> str:
    """A store failure, for a refusal's reason (never a secret: Redis URLs are not shown)."""
    if isinstance(exc, StateError | ApprovalError):
        return str(exc)
    return f"{type(exc).__name__}"


def waiting_reason(request: ApprovalRequest, link: str | None = None) -> str:
    """The refusal's ending while a request waits: its id and how a person approves it."""
    where = f" or on the approvals page ({link})" if link else ""
    return (
        f"It needs a person's approval: request {request.id} is waiting for an approver, "
        f"who can approve it with `zerto-rewind approvals approve {request.id}`{where}. "
        "The call was not run; the same call, retried after it is approved, runs once."
    )


def approved_context(request: ApprovalRequest) -> str:
    """What the model is told when an approval let its call run with no checkpoint."""
    when = f" at {fmt_time(request.decided_at)}" if request.decided_at else ""
    return (
        "zerto-rewind: this call ran with no rewind point: no Zerto checkpoint was in front "
        f"of it, so there is nothing to rewind it to. {request.decided_by} approved this "
        f"call{when} (request {request.id})."
    )
