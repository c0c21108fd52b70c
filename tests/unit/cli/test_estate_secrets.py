"""Every site's secret and host, not only the first's: the doctor's file checks, the
managed install's inline-secret check and the plugin's network hosts."""

from __future__ import annotations

from pathlib import Path

from support.config import write_config
from zerto_rewind.cli.doctor.config import zvm_secret_files
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.hostconfig.install.managed import config_credentials
from zerto_rewind.hostconfig.install.plugin import plugin_files


def estate(tmp_path: Path, **dr: str) -> Settings:
    """hq's secret in $ZPW; dr's as ``dr`` says (a secret file unless told otherwise)."""
    secret = write_config(tmp_path, "s3cret", name="dr.secret")
    dr_zvm = {"url": "https://dr.zvm.test:9669", "username": "u"}
    dr_zvm |= dr or {"password_file": str(secret)}
    data = {
        "zvms": {
            "hq": {"url": "https://hq.zvm.test", "username": "u", "password_env": "ZPW"},
            "dr": dr_zvm,
        },
        "state_dir": str(tmp_path / "state"),
    }
    path = write_config(tmp_path, data)
    return load_settings({"HOME": str(tmp_path), "ZPW": "x"}, path=str(path))


def test_the_doctor_checks_the_secret_file_of_a_site_that_is_not_the_first(
    tmp_path: Path,
) -> None:
    settings = estate(tmp_path)
    assert zvm_secret_files(settings) == {"ZVM secret file of site dr": str(tmp_path / "dr.secret")}


def test_an_inline_secret_of_a_site_that_is_not_the_first_is_a_credential_in_the_config(
    tmp_path: Path,
) -> None:
    assert config_credentials(estate(tmp_path, password="inline-pw")) == [
        "inline ZVM secrets of site dr"
    ]
    assert config_credentials(estate(tmp_path)) == []


def test_the_plugin_may_reach_every_sites_zvm(tmp_path: Path) -> None:
    settings = estate(tmp_path)
    files, _notes = plugin_files(
        settings, python="/usr/bin/python3", config=str(tmp_path / "config.json"), all_tools=True
    )
    manifest = files[".claude-plugin/plugin.json"]
    assert manifest["network"] == {"hosts": ["hq.zvm.test", "dr.zvm.test"]}
