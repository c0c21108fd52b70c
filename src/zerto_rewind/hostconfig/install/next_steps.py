"""What ``install mcp-host`` says after it wired a host: how the gateway starts, and a trial.

- the command that starts the gateway for the config just written (an HTTP
  gateway: nothing starts it yet; a stdio gateway: the host starts it);
- with ``--systemd-unit PATH``, a unit that runs that command
  (:mod:`zerto_rewind.hostconfig.gateway_unit`);
- with ``--upstream-user``, a trial start of the VM server as that user
  (:func:`zerto_rewind.gateway.upstream_probe.probe_start`), which names the
  first path the user cannot reach;
- the doctor command that asks the running gateway whether the host's URL and
  token answer.
"""

from __future__ import annotations

import os
import pwd
import shlex
import sys
from collections.abc import Mapping
from typing import Protocol

from ...config.parser import Parser
from ...config.settings import Settings
from ...gateway.upstream_probe import probe_start
from ...gateway.upstream_user import ALLOW_FLAG, upstream_identity
from ..gateway_unit import gateway_command, gateway_unit, write_unit
from ..move import HttpGateway, StdioGateway

__all__ = ["next_steps"]

_TRIAL_TIMEOUT_S = 15.0


class Asked(Protocol):
    """What the install was asked (:class:`~.mcp_host.McpHostOptions` is one)."""

    @property
    def server(self) -> str: ...
    @property
    def systemd_unit(self) -> str | None: ...
    @property
    def upstream_user(self) -> str | None: ...
    @property
    def dry_run(self) -> bool: ...
    @property
    def force(self) -> bool: ...


def next_steps(
    args: Asked,
    via: StdioGateway | HttpGateway,
    path: str,
    new_gateway: dict[str, object],
    env: Mapping[str, str],
) -> list[str]:
    """The lines after the install's summary (``--dry-run``: nothing written, nothing run).

    A line that starts with ``WARNING`` is one: the caller prints it on stderr too.
    """
    # abspath, not realpath: a venv's bin/python is a symlink, and only the venv
    # path makes the interpreter find the venv's site-packages.
    python = os.path.abspath(sys.executable)
    settings = Parser(path, os.path.dirname(path)).settings(
        new_gateway, env, loose_permissions=False
    )
    lines: list[str] = []
    if isinstance(via, StdioGateway):
        command = [python, "-m", "zerto_rewind", "gateway", "--stdio", "--upstream", args.server]
        command += ["--config", path, *([ALLOW_FLAG] if via.allow_privileged else [])]
        lines.append(f"start:       the host starts the gateway itself: {shlex.join(command)}")
    else:
        command = gateway_command(python, via.url, path)
        root = " (as root: it starts the VM server as its own user)" if _confined(settings) else ""
        lines.append(f"start:       {shlex.join(command)}{root}")
        if args.systemd_unit:
            lines.append(_unit(args, args.systemd_unit, settings, command, path))
    if args.upstream_user and not args.dry_run:
        lines.append(_trial(settings, args.server))
    doctor = f"then:        {shlex.join(['zerto-rewind', 'doctor', '--config', path])}"
    if isinstance(via, HttpGateway):
        doctor += " (it asks the running gateway's /healthz with this host's token)"
    lines.append(doctor)
    return lines


def _confined(settings: Settings) -> bool:
    return any(u.command is not None and u.user for u in settings.upstreams.values())


def _unit(args: Asked, unit: str, settings: Settings, command: list[str], path: str) -> str:
    user = None if _confined(settings) else _owner(path)
    writable = [settings.state_dir, os.path.dirname(os.path.abspath(settings.log_path))]
    for spec in settings.upstreams.values():
        writable += [os.path.dirname(p) for p in [spec.log_path] if p]
        writable += [spec.workdir] if spec.workdir else []
    text = gateway_unit(command, config=path, user=user, writable=writable)
    if args.dry_run:
        return f"unit:        would write {unit}:\n" + text.rstrip("\n")
    done = write_unit(unit, text, force=args.force)
    enable = f"systemctl daemon-reload && systemctl enable --now {os.path.basename(unit)}"
    return f"unit:        {unit} {done}; then: {enable}"


def _owner(path: str) -> str | None:
    """The gateway config's owner (the unit's user), or None for root."""
    try:
        uid = os.stat(path).st_uid
        return None if uid == 0 else pwd.getpwuid(uid).pw_name
    except (OSError, KeyError):
        return None


def _trial(settings: Settings, name: str) -> str:
    """A trial start of upstream ``name`` as its user, in one line."""
    spec = settings.upstreams[name]
    if spec.command is None:
        return "checked:     an HTTP upstream: nothing to start here"
    identity = upstream_identity(spec, settings.path)
    if identity.switch and os.geteuid() not in (0, identity.uid):
        return (
            f"note:        not tried as {identity.label}: this install runs as uid "
            f"{os.geteuid()}; `zerto-rewind doctor` as root tries it"
        )
    result = probe_start(spec, identity, _TRIAL_TIMEOUT_S)
    if result.outcome == "failed":
        return f"WARNING:     the VM server cannot start: {result.detail}"
    return f"checked:     {result.detail}"
