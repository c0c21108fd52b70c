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

import contextlib
import json
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from ..errors import StateError, ZertoRewindError
from ..fsutil import atomic_write_json, ensure_private_dir, file_lock, read_json
from .approval_secrets import mask_secrets
from .decision import arguments_digest
from .record_mac import RecordMac

__all__ = [
    "NO_APPROVER",
    "PENDING",
    "ApprovalError",
    "ApprovalLimitError",
    "ApprovalRequest",
    "ApprovalStore",
    "Approver",
    "FileApprovalStore",
    "approved_context",
    "arguments_digest",
    "join_wait",
    "new_request",
    "prompt_by_approval",
    "record_event",
    "refusal_to_approve",
    "waiting_reason",
]

PENDING, APPROVED, DENIED, EXPIRED, USED = "pending", "approved", "denied", "expired", "used"
DEFAULT_EXPIRES_S = 600.0
# Decided requests stay visible (page, `approvals list --all`) this long, then go.
RETENTION_S = 24 * 3600.0
# approvals.max_open_per_principal's default: open (live) requests one principal may hold.
DEFAULT_MAX_OPEN = 20
# Bounds on the store whatever the number of principals: open requests in all, and
# ended (decided, used, expired) ones kept for the page; the oldest ended go first.
MAX_OPEN_TOTAL = 1000
MAX_KEPT_ENDED = 1000
_LOCK_TIMEOUT_S = 10.0
NO_APPROVER = (
    "It needs a person's approval, and this guard has no approver configured "
    "(approvals.approvers). The call was not run."
)
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


class ApprovalStore(Protocol):
    """Where the service keeps approval requests; every method is atomic."""

    def open_request(
        self, template: ApprovalRequest, max_open: int = DEFAULT_MAX_OPEN
    ) -> tuple[ApprovalRequest, bool]:
        """The live request for the same principal and call, else ``template`` stored.

        Returns ``(request, created)``: a retried call joins its own open request.
        ApprovalLimitError, and nothing stored, if the principal already holds
        ``max_open`` live requests (or the store MAX_OPEN_TOTAL).
        """

    def get(self, request_id: str) -> ApprovalRequest | None: ...

    def pending(self) -> list[ApprovalRequest]: ...

    def recent(self, limit: int = 50) -> list[ApprovalRequest]:
        """Decided, used and expired requests, newest first."""

    def decide(
        self, request_id: str, approve: bool, approver: str, note: str | None = None
    ) -> ApprovalRequest:
        """Approve or deny a pending request; ApprovalError if it is not pending."""

    def consume(
        self, principal: str, tool: str, digest: str, request_id: str | None = None
    ) -> ApprovalRequest | None:
        """Use an approved, unexpired request for this exact call, once; else None."""

    def sweep(self) -> list[ApprovalRequest]:
        """Record requests whose expiry passed as ``expired``; those changed by this call.

        Reads show an expired request as expired without writing it; only the sweep
        writes, so each expiry is reported (and logged) once, by one replica.
        """

    def check(self) -> None:
        """Raise StateError if the store cannot be used."""


# --------------------------------------------------------------------------- the rules


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


# --------------------------------------------------------------------------- the file store


class FileApprovalStore:
    """Approval requests as JSON files under ``<state_dir>/approvals``, under one ``flock``.

    The state directory is the guard owner's: in a service, another user's; for
    a standalone hook, the agent's own, which is why a standalone queue is only
    as strong as a single-user install (docs/approvals.md).
    """

    def __init__(
        self, state_dir: str, *, clock: Any = time.time, mac: RecordMac | None = None
    ) -> None:
        self.root = os.path.join(state_dir, "approvals")
        self._clock = clock
        self.mac = mac if mac is not None else RecordMac.for_state_dir(state_dir)
        self._used = UsedApprovals()

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self.root)
        with file_lock(os.path.join(self.root, ".lock"), timeout_s=_LOCK_TIMEOUT_S):
            yield

    def _path(self, request_id: str) -> str:
        if not request_id or any(ch not in _ID_ALPHABET + "-" for ch in request_id):
            msg = f"{request_id!r} is not an approval request id"
            raise ApprovalError(msg)
        return os.path.join(self.root, f"{request_id}.json")

    def _load(self, path: str) -> ApprovalRequest | None:
        request_id = os.path.basename(path).removesuffix(".json")
        return open_request_record(self.mac, request_id, read_json(path))

    def _save(self, request: ApprovalRequest) -> None:
        sealed = self.mac.seal("approval", request.id, request.to_json())
        atomic_write_json(self._path(request.id), sealed)

    def _all(self) -> list[ApprovalRequest]:
        """Every request, expired ones shown settled, old ones removed (call under the lock)."""
        now = self._clock()
        found: list[ApprovalRequest] = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return []
        for name in names:
            if not name.endswith(".json"):
                continue
            path = os.path.join(self.root, name)
            request = self._load(path)
            if request is None:
                continue
            done_at = request.used_at or request.decided_at or request.expires
            if request.state not in (PENDING, APPROVED) and now - done_at > RETENTION_S:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                continue
            found.append(request)
        for request in over_kept(found):
            with contextlib.suppress(OSError):
                os.unlink(self._path(request.id))
            found.remove(request)
        return found

    def sweep(self) -> list[ApprovalRequest]:
        now = self._clock()
        changed: list[ApprovalRequest] = []
        with self._locked():
            for request in self._all():
                if request.settle(now):
                    self._save(request)
                    changed.append(request)
        return changed

    def _view(self, request: ApprovalRequest) -> ApprovalRequest:
        request.settle(self._clock())  # shown as expired; the sweep records it
        return request

    def open_request(
        self, template: ApprovalRequest, max_open: int = DEFAULT_MAX_OPEN
    ) -> tuple[ApprovalRequest, bool]:
        now = self._clock()
        with self._locked():
            live = [r for r in self._all() if r.live(now)]
            for request in live:
                if request.matches(template.principal, template.tool, template.args_digest):
                    if join_wait(request, template):
                        self._save(request)
                    return request, False
            check_open_cap(template.principal, live, max_open)
            self._save(template)
            return template, True

    def get(self, request_id: str) -> ApprovalRequest | None:
        path = self._path(request_id)
        with self._locked():
            request = self._load(path)
        return None if request is None else self._view(request)

    def pending(self) -> list[ApprovalRequest]:
        with self._locked():
            found = [r for r in map(self._view, self._all()) if r.state == PENDING]
        return sorted(found, key=lambda r: r.created)

    def recent(self, limit: int = 50) -> list[ApprovalRequest]:
        with self._locked():
            found = [r for r in map(self._view, self._all()) if r.state != PENDING]
        found.sort(key=lambda r: r.used_at or r.decided_at or r.expires, reverse=True)
        return found[:limit]

    def decide(
        self, request_id: str, approve: bool, approver: str, note: str | None = None
    ) -> ApprovalRequest:
        path = self._path(request_id)
        with self._locked():
            request = self._load(path)
            return _decide(request, request_id, approve, approver, note, self._clock(), self._save)

    def consume(
        self, principal: str, tool: str, digest: str, request_id: str | None = None
    ) -> ApprovalRequest | None:
        now = self._clock()
        with self._locked():
            for request in self._all():
                if request_id is not None and request.id != request_id:
                    continue
                live = request.live(now) and not self._used.seen(request, now)
                if live and request.state == APPROVED and request.matches(principal, tool, digest):
                    request.state, request.used_at = USED, now
                    self._save(request)
                    self._used.add(request)
                    return request
        return None

    def check(self) -> None:
        with self._locked():
            pass


def open_request_record(mac: RecordMac, request_id: str, raw: Any) -> ApprovalRequest | None:
    """The request stored as ``raw`` under ``request_id``; None if absent, damaged or forged.

    A request whose MAC fails (changed, copied from another id, or written without
    the guard's key, as records of earlier versions were) is absent: never approved.
    """
    data = mac.open("approval", request_id, raw)
    if data is None:
        return None
    try:
        request = ApprovalRequest.from_json(data)
    except TypeError:
        return None
    return request if request.id == request_id else None


class UsedApprovals:
    """The approvals this process used, until they expire: a replay is not used twice.

    The MAC proves who wrote a request, not that it is the latest version: whoever
    can write the store could put back an approved request after its use. An
    approval never outlives its (MAC-covered) expiry, so remembering each used id
    that long closes that replay in this process; another replica is covered by
    the store's authentication (docs/threat-model.md).
    """

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def seen(self, request: ApprovalRequest, now: float) -> bool:
        with self._lock:
            if self._until:
                self._until = {k: v for k, v in self._until.items() if v > now}
            return request.id in self._until

    def add(self, request: ApprovalRequest) -> None:
        with self._lock:
            self._until[request.id] = request.expires


def _decide(
    request: ApprovalRequest | None,
    request_id: str,
    approve: bool,
    approver: str,
    note: str | None,
    now: float,
    save: Any,
) -> ApprovalRequest:
    """The one decide rule both stores apply (under their own lock or transaction)."""
    if request is None:
        msg = f"no approval request {request_id}"
        raise ApprovalError(msg)
    request.settle(now)  # an expired request is not decided; the sweep records the expiry
    if request.state != PENDING:
        msg = f"request {request_id} is {request.state}, not pending; nothing was changed"
        raise ApprovalError(msg)
    request.state = APPROVED if approve else DENIED
    request.decided_by, request.decided_at = approver, now
    request.note = (note or "").strip()[:500] or None
    save(request)
    return request


def check_open_cap(principal: str, live: list[ApprovalRequest], max_open: int) -> None:
    """ApprovalLimitError if ``principal``'s live requests (of ``live``, all) reach a cap."""
    if sum(1 for r in live if r.principal == principal) >= max_open:
        raise ApprovalLimitError(principal, max_open)
    if len(live) >= MAX_OPEN_TOTAL:
        raise ApprovalLimitError(principal, MAX_OPEN_TOTAL, total=True)


def over_kept(requests: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """Ended requests beyond the newest MAX_KEPT_ENDED: removed before their retention."""
    ended = [r for r in requests if r.state not in (PENDING, APPROVED)]
    if len(ended) <= MAX_KEPT_ENDED:
        return []
    ended.sort(key=lambda r: r.used_at or r.decided_at or r.expires, reverse=True)
    return ended[MAX_KEPT_ENDED:]


def _new_id() -> str:
    raw = secrets.token_bytes(8)
    chars = "".join(_ID_ALPHABET[b % 32] for b in raw)
    return f"{chars[:4]}-{chars[4:]}"


def _iso(epoch: float) -> str:
    from .decision import fmt_time

    return fmt_time(epoch)


def store_error(exc: BaseException) -> str:
    """A store failure, for a refusal's reason (never a secret: Redis URLs are not shown)."""
    if isinstance(exc, StateError | ApprovalError):
        return str(exc)
    return f"{type(exc).__name__}"


def record_event(
    log_path: str,
    request: ApprovalRequest,
    answer: str,
    *,
    approver: str | None = None,
    note: str | None = None,
) -> None:
    """One decision-log line per event of a request; ids and names, never argument values.

    ``answer``: requested | approved | denied | refused (an approver who may not) |
    used | expired. A log that cannot be written is raised as StateError.
    """
    from .decision import fmt_time
    from .decisions_log import write_record

    record: dict[str, Any] = {
        "time": fmt_time(time.time()),
        "origin": "approvals",
        "session_id": request.session,
        "tool": request.tool,
        "row": request.row,
        "decision": "approval",
        "answer": answer,
        "approval_id": request.id,
        "client": request.principal,
        "vms": list(request.vms),
        "approver": approver or request.decided_by,
        "expires": fmt_time(request.expires),
        "reason": note if note is not None else (request.note or ""),
    }
    if request.host:  # the MCP client's clientInfo, as the call's own line names it
        record["host"] = request.host
    try:
        write_record(log_path, record)
    except OSError as exc:
        msg = f"cannot write the decision log {log_path}: {exc.strerror}"
        raise StateError(msg) from exc


def prompt_by_approval(
    store: ApprovalStore,
    log_path: str,
    *,
    tool: str,
    tool_input: Any,
    vms: Iterable[str],
    row: str,
    why: str,
    principal: str,
    expires_s: float,
    session: str | None = None,
    host: str | None = None,
    host_paths: Mapping[str, str] | None = None,
    max_open: int = DEFAULT_MAX_OPEN,
) -> tuple[ApprovalRequest | None, ApprovalRequest | None]:
    """A hook's prompt row, by approval: ``(used, None)`` if an approval covers this call
    (it is used now), else ``(None, request)``: the open request the hook names.

    Hooks do not wait: the host's own timeout is short, so they deny with the
    request's id and the retry after approval passes. Store errors propagate, and
    so does ApprovalLimitError past ``max_open`` (approvals.max_open_per_principal).
    """
    used = store.consume(principal, tool, arguments_digest(tool_input))
    if used is not None:
        _quiet_record(log_path, used, "used")
        return used, None
    template = new_request(
        tool=tool,
        tool_input=tool_input,
        vms=vms,
        row=row,
        why=why,
        principal=principal,
        expires_s=expires_s,
        session=session,
        host=host,
        host_paths=host_paths,
    )
    request, created = store.open_request(template, max_open)
    if created:
        _quiet_record(log_path, request, "requested")
    return None, request


def _quiet_record(log_path: str, request: ApprovalRequest, answer: str) -> None:
    # The answer matters more than its log line (as for decisions).
    with contextlib.suppress(StateError):
        record_event(log_path, request, answer)


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
    when = f" at {_iso(request.decided_at)}" if request.decided_at else ""
    return (
        "zerto-rewind: this call ran with no rewind point: no Zerto checkpoint was in front "
        f"of it, so there is nothing to rewind it to. {request.decided_by} approved this "
        f"call{when} (request {request.id})."
    )
