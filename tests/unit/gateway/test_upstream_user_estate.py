"""With several ZVMs, every site's secret file is the guard's: no upstream may own or sit on one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from zerto_rewind.config.loader import load_settings
from zerto_rewind.config.settings import UpstreamSettings
from zerto_rewind.errors import ConfigError
from zerto_rewind.gateway.upstream_user import _check_workdir, guard_file_owners


def estate_config(tmp_path: Path) -> Path:
    secrets = {}
    for site in ("hq", "dr"):
        secret = tmp_path / "secrets" / site / "password"
        secret.parent.mkdir(parents=True)
        secret.write_text("pw\n")
        secret.chmod(0o600)
        secrets[site] = secret
    zvms = {
        site: {"url": f"https://127.0.0.{n}:9669", "username": "u", "password_file": str(p)}
        for n, (site, p) in enumerate(secrets.items(), start=2)
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"zvms": zvms, "state_dir": str(tmp_path / "state")}))
    path.chmod(0o600)
    return path


def test_every_sites_secret_file_counts_as_the_guards(tmp_path: Path) -> None:
    settings = load_settings({}, path=str(estate_config(tmp_path)))
    owned = guard_file_owners(settings)[os.getuid()]
    assert any(item.startswith("ZVM hq secret file ") for item in owned), owned
    assert any(item.startswith("ZVM dr secret file ") for item in owned), owned


@pytest.mark.parametrize("site", ["hq", "dr"])
def test_an_upstream_workdir_on_any_sites_secret_is_refused(tmp_path: Path, site: str) -> None:
    settings = load_settings({}, path=str(estate_config(tmp_path)))
    spec = UpstreamSettings(
        name="vsphere", command=["true"], workdir=str(tmp_path / "secrets" / site)
    )
    with pytest.raises(ConfigError, match="overlaps the guard's"):
        _check_workdir(settings, spec, "upstreams.vsphere")
