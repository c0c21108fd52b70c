"""Two network facts every door agrees on: what counts as loopback, and a token's digest.

The gateway refuses clear-text HTTP beyond this machine in three places (its own
bind, a webhook URL, a host's ``--url``); they must draw the loopback line in the
same place. A client token is stored only as its digest, and the installer that
writes one and the gateway that checks it must compute the same digest.
"""

from __future__ import annotations

import hashlib
import ipaddress

__all__ = ["is_loopback", "token_digest"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name, an address, or a bracketed IPv6 address) is this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_digest(token: str) -> str:
    """What the config stores for a client token (SHA-256, hex)."""
    return hashlib.sha256(token.encode()).hexdigest()
