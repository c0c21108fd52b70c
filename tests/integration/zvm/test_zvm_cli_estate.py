"""`zerto-rewind status | checkpoints | tag` against two simulators, one ZVM per site."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.config import write_estate_config
from support.sim import estate_sims
from zerto_rewind.cli import main as cli_main
from zerto_rewind.cli import zvm_cmds
from zerto_rewind.sim import SimServer
from zerto_rewind.testing import FAST_CADENCES


@pytest.fixture
def sims(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, SimServer]]:
    """hq and dr simulators, the CLI pointed at both through zvms."""
    monkeypatch.setenv("COLUMNS", "250")
    with estate_sims(tmp_path) as running:
        path = write_estate_config(running, tmp_path, guard={"site_cadence_s": FAST_CADENCES})
        monkeypatch.setenv("ZERTO_REWIND_CONFIG", str(path))
        monkeypatch.delenv("ZERTO_REWIND_STATE_DIR", raising=False)
        yield running


def test_status_finds_a_vm_of_another_site_and_names_it(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert zvm_cmds.status(["db-01", "--json"]) == 0
    (vpg,) = json.loads(capsys.readouterr().out)["vpgs"]
    assert (vpg["zvm_site"], vpg["vpg"]) == ("dr", "dr-vpg")
    assert zvm_cmds.status(["web-01"]) == 0
    out = capsys.readouterr().out
    assert "ZVM site" in out
    assert "hq" in out
    assert out.count("web-vpg") == 1  # listed by both ZVMs, shown once


def test_tag_lands_on_the_protected_sites_zvm_and_is_listed(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert zvm_cmds.tag(["db-01", "--name", "before upgrade", "--timeout", "20"]) == 0
    out = capsys.readouterr().out
    assert "dr-vpg" in out
    assert "dr" in out
    assert zvm_cmds.checkpoints(["db-01", "--tagged", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [(r["zvm_site"], r["vpg"], r["tag"]) for r in rows] == [
        ("dr", "dr-vpg", "before upgrade")
    ]


def test_unknown_everywhere_names_every_zvm(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["status", "ghost-01"]) == 1
    err = capsys.readouterr().err
    assert "NotFound" in err
    assert "site hq" in err
    assert "site dr" in err


def test_a_dark_site_is_named_not_called_unprotected(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    sims["dr"].stop()
    assert cli_main(["status", "web-01b"]) == 1
    err = capsys.readouterr().err
    assert "site dr" in err
    assert "did not answer" in err
    assert "NotFound" not in err
