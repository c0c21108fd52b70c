"""``zerto-rewind gateway``: the guard as a service in front of VM MCP servers."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping

from ..config.loader import load_config
from ..errors import UsageError, ZertoRewindError
from . import report_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..gateway.run import ApprovalChannels

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="zerto-rewind gateway",
        description=(
            "Serve VM MCP servers through the guard: every tools/call is checkpointed, "
            "refused or put to a human first. See docs/gateway.md."
        ),
    )
    parser.add_argument(
        "--config", metavar="PATH", help="config file (default ZERTO_REWIND_CONFIG)"
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--stdio", action="store_true", help="serve one upstream on stdin/stdout")
    mode.add_argument("--listen", metavar="HOST:PORT", help="serve every upstream over HTTP")
    mode.add_argument(
        "--socket",
        metavar="PATH",
        help="serve the decision endpoint for thin hooks (and MCP) on a unix socket",
    )
    mode.add_argument(
        "--hash-token",
        action="store_true",
        help="read a client token on stdin, print the digest for gateway.clients",
    )
    parser.add_argument("--upstream", metavar="NAME", help="with --stdio: the upstream to serve")
    parser.add_argument(
        "--ready-file", metavar="F", help="with --listen: write {url, mcp, pid} as JSON once ready"
    )
    parser.add_argument(
        "--also-socket", metavar="PATH", help="with --listen: serve a unix socket as well"
    )
    parser.add_argument(
        "--approvals-socket",
        metavar="PATH",
        help="serve the approvals socket (approvers known by SO_PEERCRED; docs/approvals.md)",
    )
    parser.add_argument(
        "--approvals-listen",
        metavar="HOST:PORT",
        help="serve the approvals page for approver logins (TLS beyond loopback)",
    )
    parser.add_argument(
        "--allow-privileged-upstream",
        action="store_true",
        help="start stdio upstreams even as root or as the user owning the guard's files "
        "(they could then read its secrets and rewrite its log; docs/gateway.md)",
    )
    parser.add_argument(
        "--socket-mode",
        default="0660",
        metavar="OCTAL",
        help="the socket file's mode (default 0660: its owner and group may connect)",
    )
    return parser


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    if args.hash_token:
        from ..gateway.http import token_digest

        token = sys.stdin.readline().strip()
        if not token:
            msg = "no token on stdin; write the token on the first line of stdin"
            report_error("gateway", UsageError(msg))
            return 2
        sys.stdout.write(token_digest(token) + "\n")
        return 0
    env = dict(os.environ if env is None else env)
    if args.config:
        env["ZERTO_REWIND_CONFIG"] = args.config
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    # Errors of the tree go to the edge in cli; only ^C is this command's own business.
    try:
        settings = load_config(env)
        from ..gateway.run import ApprovalChannels

        channels = ApprovalChannels(
            args.approvals_socket,
            _host_port(args.approvals_listen, "--approvals-listen")
            if args.approvals_listen
            else None,
        )
        code = _serve(args, settings, channels)
    except KeyboardInterrupt:
        return 130
    return code


def _serve(args: argparse.Namespace, settings: Settings, channels: ApprovalChannels) -> int:
    """Run the gateway until it stops; an error of the tree a task group wrapped is
    raised bare, so the edge prints it as one line."""
    import anyio

    from ..gateway.run import serve_http, serve_stdio

    try:
        if args.stdio:
            if not args.upstream:
                msg = "--stdio without --upstream; name the server to serve with --upstream NAME"
                report_error("gateway", UsageError(msg))
                return 2
            anyio.run(
                lambda: serve_stdio(
                    settings,
                    args.upstream,
                    approvals=channels,
                    allow_privileged_upstream=args.allow_privileged_upstream,
                )
            )
        else:
            host, port = _host_port(args.listen) if args.listen else (None, 0)
            unix = args.socket or args.also_socket
            mode = _octal(args.socket_mode)
            anyio.run(
                lambda: serve_http(
                    settings,
                    host,
                    port,
                    ready_file=args.ready_file,
                    unix_socket=unix,
                    socket_mode=mode,
                    approvals=channels,
                    allow_privileged_upstream=args.allow_privileged_upstream,
                )
            )
    except BaseExceptionGroup as group:
        error = _tree_error(group)
        if error is None:
            raise
        raise error from None
    return 0


def _tree_error(group: BaseExceptionGroup[BaseException]) -> ZertoRewindError | None:
    """The one error of the tree a task group wrapped (a listener that cannot bind, say),
    so the edge prints it as one line; anything else goes on as it came."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        item = pending.pop()
        if isinstance(item, BaseExceptionGroup):
            pending.extend(item.exceptions)
        else:
            leaves.append(item)
    if len(leaves) == 1 and isinstance(leaves[0], ZertoRewindError):
        return leaves[0]
    return None


def _host_port(text: str, option: str = "--listen") -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        msg = f"{option} {text!r}: not HOST:PORT; write it as HOST:PORT, such as 127.0.0.1:8443"
        raise UsageError(msg)
    return host, int(port)


def _octal(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        msg = f"--socket-mode {text!r}: not an octal mode; write it in octal, such as 0660"
        raise UsageError(msg)
    return mode
