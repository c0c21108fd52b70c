"""``zerto-rewind doctor`` as its own process over the three-sites simulator process (four
ZVMs over TLS): one line per site, pairing seen from both sides, a dark site named alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.config import write_ready_estate_config
from support.sim import estate_sim_fixture, set_site_fault

SITES = ("hq", "dr", "azure", "aws")


ready = estate_sim_fixture()


def doctor(config: Path, home: Path) -> tuple[int, dict[str, dict[str, str]], str]:
    """(exit code, checks by name, everything printed) of ``doctor --json --config``."""
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-m", "zerto_rewind", "doctor", "--json", "--config", str(config)],
        capture_output=True, text=True, env=env, cwd=home, timeout=120, check=False,
    )  # fmt: skip
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    return done.returncode, checks, done.stdout + done.stderr


def test_every_site_answers_and_pairs_with_the_others(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = write_ready_estate_config(ready, tmp_path)
    _code, checks, printed = doctor(config, tmp_path / "home")
    for site in SITES:
        line = checks[f"zvm: {site}"]
        assert line["status"] == "pass", line
        assert ready["sites"][site]["url"] in line["detail"]
        assert f"site identifier {ready['sites'][site]['site_identifier']}" in line["detail"]
        assert checks[f"pairing: {site}"]["status"] == "pass", checks[f"pairing: {site}"]
    assert "paired with dr, azure" in checks["pairing: hq"]["detail"]
    assert "paired with dr" in checks["pairing: aws"]["detail"]
    assert "zvm" not in checks  # no first-site-only line beside the per-site ones
    assert checks["tls"]["status"] == "pass"
    for site in SITES:
        assert ready["sites"][site]["password"] not in printed


def test_a_site_that_is_down_is_reported_for_that_site_only(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    config = write_ready_estate_config(ready, tmp_path)
    set_site_fault(ready, "aws", {"kind": "down"})
    try:
        code, checks, _printed = doctor(config, tmp_path / "home")
    finally:
        set_site_fault(ready, "aws", None)
    assert code == 1
    assert checks["zvm: aws"]["status"] == "fail"
    assert ready["sites"]["aws"]["url"] in checks["zvm: aws"]["fix"]
    assert checks["pairing: aws"]["status"] == "warn"
    assert "did not answer" in checks["pairing: aws"]["detail"]
    for site in ("hq", "dr", "azure"):
        assert checks[f"zvm: {site}"]["status"] == "pass", checks[f"zvm: {site}"]
        assert checks[f"pairing: {site}"]["status"] == "pass", checks[f"pairing: {site}"]
    estate = [c for n, c in checks.items() if n.startswith(("zvm", "pairing", "secret", "tls"))]
    assert [c["name"] for c in estate if c["status"] != "pass"] == ["zvm: aws", "pairing: aws"]


def test_a_peer_site_missing_from_zvms_warns_that_its_vms_are_denied(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    """Only hq and dr configured: azure (hq's peer) and aws (dr's) are not in zvms."""
    config = write_ready_estate_config(ready, tmp_path, sites=["hq", "dr"])
    _code, checks, _printed = doctor(config, tmp_path / "home")
    assert checks["zvm: hq"]["status"] == checks["zvm: dr"]["status"] == "pass"
    hq, dr = checks["pairing: hq"], checks["pairing: dr"]
    assert hq["status"] == dr["status"] == "warn"
    assert "peer site 'azure'" in hq["detail"]
    assert "has no entry in zvms: the guard denies every VM protected from it" in hq["detail"]
    assert "peer site 'aws'" in dr["detail"]
    assert "zvm: azure" not in checks


def test_a_configured_site_paired_with_no_other_configured_site_warns(
    ready: dict[str, Any], tmp_path: Path
) -> None:
    """azure pairs only with hq, aws only with dr: configured alone together, both warn."""
    config = write_ready_estate_config(ready, tmp_path, sites=["azure", "aws"])
    _code, checks, _printed = doctor(config, tmp_path / "home")
    for site in ("azure", "aws"):
        line = checks[f"pairing: {site}"]
        assert line["status"] == "warn"
        assert f"site {site} is paired with no other site of zvms" in line["detail"]
