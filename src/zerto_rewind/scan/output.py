"""Where ``catalog scan --out`` writes: atomically, keeping the file's mode and owner.

``catalog scan --merge CFG --out CFG`` rewrites the gateway's config, which may
hold VM credentials (``upstreams.*.env``/``headers``) or the ZVM secret inline.
:func:`write_scan_output` keeps the old file's mode and owner (a new file is
0600), and refuses, writing nothing, to leave such a config readable by group
or others. Messages name keys, never a value.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError, StateError
from ..fsutil import atomic_write_text

__all__ = ["secret_keys", "write_scan_output"]

_ZVM_INLINE_SECRETS = ("password", "client_secret")


def secret_keys(config: Mapping[str, Any]) -> list[str]:
    """The keys of ``config`` that hold a credential inline (names only)."""
    found: list[str] = []
    zvm = config.get("zvm")
    if isinstance(zvm, dict):
        found += [f"zvm.{k}" for k in _ZVM_INLINE_SECRETS if zvm.get(k)]
    upstreams = config.get("upstreams")
    if isinstance(upstreams, dict):
        for name, spec in upstreams.items():
            if isinstance(spec, dict):
                found += [f"upstreams.{name}.{k}" for k in ("env", "headers") if spec.get(k)]
    return found


def write_scan_output(path: str, text: str, data: Mapping[str, Any]) -> None:
    """Replace ``path`` with ``text`` (the JSON of ``data``), mode and owner kept; new: 0600.

    ConfigError, with nothing written, when ``data`` holds credentials and the
    file's mode lets group or others read it.
    """
    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        msg = f"cannot read its mode ({exc.strerror}); nothing was written"
        raise ConfigError(msg, path=path) from None
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o600
    secrets = secret_keys(data)
    if secrets and mode & 0o077:
        msg = (
            f"would hold credentials ({', '.join(secrets)}) in a file others can read (mode "
            f"{mode:04o}); nothing was written: chmod 600 it (and rotate those credentials if "
            "others could read it), then run this again"
        )
        raise ConfigError(msg, path=path)
    owner = (st.st_uid, st.st_gid) if st is not None else None
    try:
        atomic_write_text(path, text, mode=mode, owner=owner)
    except StateError as exc:
        msg = f"{exc}; nothing was written (it keeps its owner uid {owner[0] if owner else '?'})"
        raise ConfigError(msg, path=path) from None
