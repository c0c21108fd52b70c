"""The sandbox over a multi-site estate: a ``zvms`` config from the simulator's sites, a
secret variable per site, per-site control and per-site tag counts, through the real
hook process over TLS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from zerto_rewind.config import load_settings
from zerto_rewind.testing import (
    FAST_CADENCES,
    SECRET_ENV,
    THREE_ZVMS,
    Sandbox,
    fast_sim_config,
    secret_env,
)

POWER_OFF = "mcp__vsphere__power_off_vm"


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    root = tmp_path_factory.mktemp("sandbox-estate")
    config = fast_sim_config(cadences=FAST_CADENCES)
    with Sandbox(
        str(root),
        sim_config=config,
        estate=THREE_ZVMS,
        guard={"timeout_s": 10},
        zvm={"read_timeout_s": 3},
    ) as sandbox:
        yield sandbox


def test_the_config_names_every_site_with_its_own_secret_variable(box: Sandbox) -> None:
    written = json.loads(Path(box.config_path).read_text())
    assert "zvm" not in written
    assert list(written["zvms"]) == ["hq", "dr", "azure"]
    for site, entry in written["zvms"].items():
        ready = box.sites[site]
        assert entry["url"] == ready["url"]
        assert entry["client_id"] == ready["client_id"]
        assert entry["client_secret_env"] == secret_env(site)
        assert entry["ca_bundle"] == ready["ca_bundle"]
        assert entry["read_timeout_s"] == 3
        assert ready["client_secret"] not in json.dumps(entry)
    settings = load_settings(box.env())
    assert {site: zvm.url for site, zvm in settings.zvms.items()} == {
        site: ready["url"] for site, ready in box.sites.items()
    }
    assert secret_env("dr") == f"{SECRET_ENV}_DR"


def test_tags_are_counted_on_the_site_that_took_them(box: Sandbox) -> None:
    box.control("POST", "/_sim/reset")
    run = box.run_hook(POWER_OFF, {"name": "db-01"})
    assert run.decision == "context", run.reason
    assert box.tag_counts() == {"hq": {}, "dr": {"dr-db-hq": 1}, "azure": {}}
    assert box.tag_requests("dr-db-hq", site="dr") == 1
    assert box.tag_requests(site="hq") == 0
    assert box.tag_requests() == 1


def test_a_fault_on_the_first_site_is_set_and_cleared_through_another(box: Sandbox) -> None:
    """``down`` on hq (the first ZVM) goes through dr's port, where it can be cleared."""
    box.control("POST", "/_sim/reset")
    box.control("POST", "/_sim/faults", {"kind": "down"}, site="hq")
    try:
        run = box.run_hook(POWER_OFF, {"name": "web-01"}, session_id="sandbox-session-0002")
        assert run.decision == "deny"
        assert "site hq" in run.reason
    finally:
        box.control("DELETE", "/_sim/faults", site="hq")
    assert box.tag_requests() == 0
