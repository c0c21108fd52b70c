"""Fakes for the ZVM client's unit tests: settings and wire samples.

The fake clock and the scripted ZVM live in :mod:`support.fakes`, re-exported here.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from support.fakes import TOKEN_PATH, FakeClock, FakeZvm
from zerto_rewind.config import ZvmSettings

__all__ = [
    "SECRET",
    "TOKEN_PATH",
    "URL",
    "FakeClock",
    "FakeZvm",
    "body_of",
    "make_settings",
]

URL = "https://zvm.example:443"
SECRET = "s3cret-value"


def make_settings(**overrides: Any) -> ZvmSettings:
    """ZvmSettings for a client_credentials identity with an inline secret."""
    values: dict[str, Any] = {
        "url": URL,
        "grant": "client_credentials",
        "client_id": "rewind",
        "username": None,
        "secret_source": ("inline", SECRET),
    }
    values.update(overrides)
    return ZvmSettings(**values)


def body_of(request: httpx.Request) -> Any:
    """The decoded JSON body of a recorded request."""
    return json.loads(request.content)


VPG_WIRE: dict[str, Any] = {
    "VpgIdentifier": "11111111-aaaa-bbbb-cccc-000000000001",
    "VpgName": "jp-local",
    "Status": 1,
    "SubStatus": 0,
    "Entities": {"Protected": 0, "Recovery": 0},
    "ProtectedSiteName": "Site-A",
    "RecoverySiteName": "Site-B",
    "ActualRPO": 6,
    "ConfiguredRpoSeconds": 300,
    "HistoryStatusApi": {"ActualHistoryInMinutes": 60, "ConfiguredHistoryInMinutes": 60},
    "VmsCount": 1,
    "ActiveProcessesApi": {"RunningFailOverTestApi": None},
    "Link": {"href": "https://zvm/v1/vpgs/x", "identifier": "x", "rel": None, "type": "VpgApi"},
}

VM_WIRE: dict[str, Any] = {
    "VmIdentifier": "d4a6a1d5-79e9-4308-990a-7c3e616f0908.vm-38",
    "VmName": "jp-ubuntu",
    "VpgIdentifier": VPG_WIRE["VpgIdentifier"],
    "VpgName": "jp-local",
    "Status": 1,
}
