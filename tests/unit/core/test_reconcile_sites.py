"""Reconciling a pending tag asks the ZVM of the site that took it (its record's ``site``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from zerto_rewind.core.reconcile import reconcile
from zerto_rewind.core.state import GuardState, TagRecord
from zerto_rewind.errors import ZvmError
from zerto_rewind.zvm.models import Checkpoint

VPG = "vpg-dr-1"


class Journal:
    """One site's ZVM: the checkpoints it lists, and who asked."""

    def __init__(self, checkpoints: list[Checkpoint]) -> None:
        self.checkpoints, self.asked = checkpoints, 0

    def list_checkpoints(self, vpg_id: str, **_: Any) -> list[Checkpoint]:
        self.asked += 1
        return self.checkpoints


def pending(tmp_path: Path, site: str | None) -> GuardState:
    state = GuardState(str(tmp_path / "state"))
    now = time.time()
    with state.vpg(VPG) as record:
        record.tag = TagRecord("zr-1", now - 5, now + 60, now + 120, site=site)
    return state


def records() -> list[dict[str, Any]]:
    return [{"row": "pending", "vpg_ids": [VPG], "tags": ["zr-1"]}]


def test_the_tag_is_asked_of_its_own_sites_zvm(tmp_path: Path) -> None:
    landed = Checkpoint("cp-9", datetime.now(UTC), "zr-1", None)
    zvms = {"hq": Journal([]), "dr": Journal([landed])}
    fates = reconcile(records(), pending(tmp_path, "dr"), clients=lambda s: zvms[s or "hq"])
    assert fates["zr-1"].state == "landed"
    assert (zvms["dr"].asked, zvms["hq"].asked) == (1, 0)


def test_a_site_no_longer_configured_keeps_the_tag_pending_and_says_why(tmp_path: Path) -> None:
    def gone(site: str | None) -> Journal:
        raise ZvmError(f"site {site} is no longer in the config's zvms")

    fates = reconcile(records(), pending(tmp_path, "azure"), clients=gone)
    assert fates["zr-1"].state == "pending"
    assert "could not ask the ZVM of site azure" in fates["zr-1"].detail
