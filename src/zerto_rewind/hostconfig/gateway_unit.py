"""How the gateway an install wired is started: its command line, and a systemd unit for it.

``install mcp-host --url`` points a host at an HTTP gateway that nothing starts
yet; it prints :func:`gateway_command` and, with ``--systemd-unit PATH``, writes
:func:`gateway_unit` there. The unit carries the hardening docs/gateway.md
recommends. A gateway whose stdio upstreams run as users of their own must be
root to switch to them (the launcher drops to that user for the server only), so
such a unit runs as root with only the capabilities that switch and its clean-up
need; otherwise it runs as the owner of the gateway's config.
"""

from __future__ import annotations

import os
import pwd
import shlex
from collections.abc import Iterable
from urllib.parse import urlsplit

from ..errors import ConfigError
from ..fsutil import atomic_write_text

__all__ = ["gateway_command", "gateway_unit", "write_unit"]

# What a root gateway needs to run confined upstreams: set*id and setgroups (the
# launcher), chown/chmod and removal of the upstream's private directory, signals
# to its process group; and a port below 1024 if one is asked for.
_ROOT_CAPABILITIES = (
    "CAP_SETUID CAP_SETGID CAP_CHOWN CAP_FOWNER CAP_DAC_OVERRIDE CAP_KILL CAP_NET_BIND_SERVICE"
)


def gateway_command(python: str, url: str, config: str) -> list[str]:
    """``python -m zerto_rewind gateway --listen HOST:PORT --config CONFIG`` for ``url``."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    listen = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return [python, "-m", "zerto_rewind", "gateway", "--listen", listen, "--config", config]


def gateway_unit(
    command: list[str], *, config: str, user: str | None, writable: Iterable[str]
) -> str:
    """The unit's text: ``command`` as a service, as ``user`` (None: root, capabilities bounded)."""
    who = (
        [f"User={user}", f"Group={_group_of(user)}"]
        if user is not None
        else [
            "# root, to start each stdio upstream as its own user (upstreams.NAME.user)",
            f"CapabilityBoundingSet={_ROOT_CAPABILITIES}",
        ]
    )
    paths = " ".join(f"-{p}" for p in sorted(set(writable)))
    lines = [
        "# written by `zerto-rewind install mcp-host --systemd-unit`; see docs/gateway.md",
        "[Unit]",
        "Description=zerto-rewind MCP gateway",
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        *who,
        f"Environment=ZERTO_REWIND_CONFIG={config}",
        f"ExecStart={shlex.join(command)}",
        "Restart=on-failure",
        "RestartSec=2s",
        "LimitNOFILE=65536",
        "UMask=0077",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=read-only",
        "PrivateTmp=yes",
        "PrivateDevices=yes",
        "ProtectKernelTunables=yes",
        "ProtectKernelModules=yes",
        "ProtectControlGroups=yes",
        "RestrictSUIDSGID=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "LockPersonality=yes",
        f"ReadWritePaths={paths}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


def _group_of(user: str) -> str:
    try:
        gid = pwd.getpwnam(user).pw_gid
    except KeyError:
        return user
    import grp

    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def write_unit(path: str, text: str, *, force: bool) -> str:
    """Write the unit to ``path``; ``"written"`` or ``"unchanged"``.

    A different file already there is kept unless ``force`` (ConfigError says so).
    """
    try:
        with open(path, encoding="utf-8") as fh:
            current: str | None = fh.read()
    except FileNotFoundError:
        current = None
    except OSError as exc:
        msg = f"cannot read it to compare it: {exc.strerror}"
        raise ConfigError(msg, path=path) from None
    if current == text:
        return "unchanged"
    if current is not None and not force:
        msg = (
            "a different file is there already, and it is kept (nothing written). Compare "
            "it with the unit this install would write (--dry-run shows it), then re-run "
            "with --force to replace it"
        )
        raise ConfigError(msg, path=path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        msg = f"no directory {directory} for the unit"
        raise ConfigError(msg, path=path)
    atomic_write_text(path, text, mode=0o644)
    return "written"
