"""``zerto-rewind approvals``: list, show, approve and deny the calls waiting for a person.

With ``--service unix:PATH`` (or ``ZERTO_REWIND_APPROVALS``) it asks the guard
service's approvals socket, which knows who you are from the kernel (who
connected, ``SO_PEERCRED``, and who sent each request, ``SCM_CREDENTIALS``: the
CLI sends its own with every request) and refuses anyone who is not an approver. The CLI checks the
other way too, before it sends or shows anything: the socket must be served by
the guard service's user (``--service-user``, ``ZERTO_REWIND_SERVICE_USER``, or
else the owner of the socket's directory when only that owner may write in it),
as the thin hook checks (``service_client.check_peer``). Without it, it works
on the standalone hook's own queue in the config's state directory: that queue
belongs to the agent's user, so it is only as strong as a single-user install
(docs/approvals.md).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError, ZertoRewindError
from . import report_error

__all__ = ["main", "send_with_credentials"]

_TIMEOUT_S = 10.0
# A request carries its whole arguments: the answer may be long.
_MAX_ANSWER = 64 * 1024 * 1024


class ApprovalsCliError(ZertoRewindError):
    """The approvals socket could not be reached, or refused the request."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind approvals",
        description="Calls that wait for a person's approval (docs/approvals.md).",
    )
    parser.add_argument(
        "--service",
        metavar="unix:PATH",
        help="the guard service's approvals socket (default $ZERTO_REWIND_APPROVALS; "
        "without one: the standalone hook's own queue)",
    )
    parser.add_argument(
        "--service-user",
        metavar="NAME|UID",
        help="the guard service's user, which must serve the socket (default "
        "$ZERTO_REWIND_SERVICE_USER, else the owner of the socket's directory)",
    )
    parser.add_argument("--config", metavar="PATH", help="config file, for the standalone queue")
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="the pending requests")
    listing.add_argument("--json", action="store_true", help="print JSON")
    recent = sub.add_parser("recent", help="decided, used and expired requests")
    recent.add_argument("--json", action="store_true", help="print JSON")
    show = sub.add_parser("show", help="one request, in full")
    show.add_argument("id")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.add_argument("--full", action="store_true", help="every value whole, however long")
    approve = sub.add_parser("approve", help="approve one request: its call may run once")
    approve.add_argument("id")
    deny = sub.add_parser("deny", help="deny one request")
    deny.add_argument("id")
    deny.add_argument("--reason", metavar="TEXT", help="why, for the log and the requester")
    sub.add_parser("whoami", help="who the service sees you as, and whether you may approve")
    sub.add_parser("hash-password", help="read a page approver's password on stdin, print it")
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    env = dict(os.environ if env is None else env)
    if args.action == "hash-password":
        return _hash_password()
    service = args.service or env.get("ZERTO_REWIND_APPROVALS", "").strip() or None
    _print(args, _ask(service, args, env))
    return 0


def _hash_password() -> int:
    from ..gateway.approvals_auth import hash_password

    password = sys.stdin.readline().rstrip("\n")
    if len(password) < 12:
        msg = "the password is shorter than 12 characters; use one of 12 characters or more"
        report_error("approvals", UsageError(msg))
        return 2
    sys.stdout.write(hash_password(password) + "\n")
    return 0


def _request(args: argparse.Namespace) -> dict[str, Any]:
    message: dict[str, Any] = {"op": args.action}
    if getattr(args, "id", None):
        message["id"] = args.id
    if getattr(args, "reason", None):
        message["reason"] = args.reason
    return message


def _ask(service: str | None, args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    message = _request(args)
    if service:
        user = args.service_user or env.get("ZERTO_REWIND_SERVICE_USER", "").strip() or None
        answer = _over_socket(service, message, user)
    else:
        answer = _local(args, env, message)
    if not answer.get("ok"):
        raise ApprovalsCliError(str(answer.get("error") or "the request was refused"))
    return answer


def _over_socket(service: str, message: dict[str, Any], service_user: str | None) -> dict[str, Any]:
    if not service.startswith("unix:"):
        msg = f"--service wants unix:PATH (the approvals socket), not {service!r}"
        raise ApprovalsCliError(msg)
    path = service[5:]
    expected = service_user or _directory_owner(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(_TIMEOUT_S)
    try:
        try:
            sock.connect(path)
        except OSError as exc:
            msg = f"cannot connect to the approvals socket {path} ({exc.strerror or exc})"
            raise ApprovalsCliError(msg) from None
        _check_service(sock, path, expected)  # before a byte is sent or shown
        send_with_credentials(sock, json.dumps(message).encode() + b"\n")
        with sock.makefile("rb") as reader:
            line = reader.readline(_MAX_ANSWER)
    except TimeoutError:
        msg = f"the approvals socket {path} did not answer within {_TIMEOUT_S:g} s"
        raise ApprovalsCliError(msg) from None
    finally:
        sock.close()
    try:
        answer = json.loads(line)
    except ValueError:
        msg = f"the approvals socket {path} answered something that is not JSON"
        raise ApprovalsCliError(msg) from None
    if not isinstance(answer, dict):
        msg = f"the approvals socket {path} answered something that is not a JSON object"
        raise ApprovalsCliError(msg)
    return answer


def send_with_credentials(sock: socket.socket, data: bytes) -> None:
    """Send ``data`` with this process's credentials (``SCM_CREDENTIALS``) on every piece.

    The kernel checks them (a process may name only its own pid, uid and gid unless
    privileged), and the service decides each request by them, not only by who
    connected: docs/approvals.md.
    """
    import struct

    creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
    ancillary = [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)]
    view = memoryview(data)
    while view:
        sent = sock.sendmsg([view], ancillary)
        view = view[sent:]


def _directory_owner(path: str) -> str:
    """The uid owning the socket's directory, if only that owner may write in it."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        info = os.stat(directory)
    except OSError as exc:
        msg = f"cannot read the approvals socket's directory {directory} ({exc.strerror})"
        raise ApprovalsCliError(msg) from None
    if info.st_mode & 0o022:
        msg = (
            f"the approvals socket's directory {directory} is writable by others than its "
            "owner, so who serves the socket cannot be told from it: name the guard "
            "service's user with --service-user (or ZERTO_REWIND_SERVICE_USER)"
        )
        raise ApprovalsCliError(msg)
    return str(info.st_uid)


def _check_service(sock: socket.socket, path: str, service_user: str) -> None:
    """The socket is served by ``service_user`` (SO_PEERCRED), as the thin hook checks."""
    from ..service_client import ServiceIdentityError, check_peer

    try:
        check_peer(sock, path, service_user)
    except ServiceIdentityError as exc:
        msg = (
            f"{exc}. Nothing was sent and nothing is shown: this may be a look-alike of "
            "the guard service. Check the socket's path, or name the service's user with "
            "--service-user."
        )
        raise ApprovalsCliError(msg) from None


def _local(
    args: argparse.Namespace, env: dict[str, str], message: dict[str, Any]
) -> dict[str, Any]:
    """The standalone hook's queue, in the state directory, as the current unix user."""
    from ..config.loader import load_config
    from ..core.approval_view import approver_json
    from ..core.approvals import (
        ApprovalError,
        Approver,
        FileApprovalStore,
        record_event,
        refusal_to_approve,
    )

    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    settings = load_config(env)
    store = FileApprovalStore(settings.state_dir)
    config = settings.approvals
    approver = Approver("unix", getpass.getuser(), _my_groups())
    refused = refusal_to_approve(
        approver,
        None,
        users=config.approver_users,
        groups=config.approver_groups,
        agent_users=config.agent_users,
    )
    if refused is not None:
        return {"ok": False, "error": refused}
    op = message["op"]
    if op == "whoami":
        return {"ok": True, "approver": approver.label, "may_approve": True, "why_not": None}
    if op == "list":
        return {"ok": True, "pending": [approver_json(r) for r in store.pending()]}
    if op == "recent":
        return {"ok": True, "recent": [approver_json(r) for r in store.recent()]}
    request = store.get(message["id"])
    if request is None:
        return {"ok": False, "error": f"no approval request {message['id']}"}
    if op == "show":
        return {"ok": True, "request": approver_json(request), "link": None}
    try:
        decided = store.decide(request.id, op == "approve", approver.label, message.get("reason"))
    except ApprovalError as exc:
        return {"ok": False, "error": str(exc)}
    from ..core.decisions_log import register_anchor
    from ..core.log_anchor import policy_for

    register_anchor(policy_for(settings))
    record_event(settings.log_path, decided, "approved" if op == "approve" else "denied")
    return {"ok": True, "request": approver_json(decided)}


def _my_groups() -> tuple[str, ...]:
    import grp

    names = set()
    for gid in os.getgroups():
        try:
            names.add(grp.getgrgid(gid).gr_name)
        except KeyError:
            continue
    return tuple(sorted(names))


# --------------------------------------------------------------------------- output


def _print(args: argparse.Namespace, answer: dict[str, Any]) -> None:
    """The answer as text; every value from the call made visible (approvals_text)."""
    from ..core.approval_view import lines_of, visible
    from ..core.approvals import ApprovalRequest
    from .approvals_text import details, listing

    action = args.action
    as_json = getattr(args, "json", False)
    if action in ("list", "recent"):
        raws = [r for r in answer.get(action.replace("list", "pending"), []) if isinstance(r, dict)]
        requests = [(ApprovalRequest.from_json(r), lines_of(r)) for r in raws]
        if as_json:
            print(json.dumps([r.summary() for r, _ in requests], indent=2))
        elif not requests:
            print("no pending requests" if action == "list" else "no decided requests")
        else:
            print("\n".join(listing(requests)))
        return
    if action == "whoami":
        verdict = (
            "may approve" if answer.get("may_approve") else f"may not: {answer.get('why_not')}"
        )
        print(visible(f"{answer.get('approver')}: {verdict}"))
        return
    raw = answer["request"]
    request = ApprovalRequest.from_json(raw)
    if action == "show":
        link = answer.get("link")
        if as_json:
            print(json.dumps({**raw, "link": link}, indent=2))
        else:
            print(details(request, lines_of(raw), link, full=args.full))
        return
    verb = "approved" if action == "approve" else "denied"
    vms = ", ".join(visible(v) for v in request.vms) or "no VM"
    print(f"{request.id} {verb}: {visible(request.tool)} on {vms}")
