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


def test_a_vpg_that_cannot_be_tagged_is_shown_with_why(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    """from-aws is protected from a site no ZVM of the estate is: shown, marked, refused."""
    assert zvm_cmds.status(["cloud-01", "--json"]) == 0
    (vpg,) = json.loads(capsys.readouterr().out)["vpgs"]
    assert (vpg["vpg"], vpg["zvm_site"]) == ("from-aws", "hq")
    assert vpg["tag_refusal"]
    assert zvm_cmds.status(["cloud-01"]) == 0
    out = capsys.readouterr().out
    assert "from-aws (cannot tag)" in out
    assert "cannot tag VPG from-aws: " in out
    assert cli_main(["tag", "cloud-01", "--timeout", "20"]) == 1
    assert "Refused" in capsys.readouterr().err


def test_a_dark_site_is_listed_though_the_answer_was_cached(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    """Within the VM cache's minute after dr went dark, status still lists dr, once, in text
    and --json; dr's VPG is shown through hq and marked as not taggable."""
    assert zvm_cmds.status(["db-01"]) == 0  # fills the caches while both answer
    capsys.readouterr()
    sims["dr"].stop()
    assert zvm_cmds.status(["db-01", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["site"] for s in report["unreachable_sites"]] == ["dr"]
    assert report["unreachable_sites"][0]["error"]
    (vpg,) = report["vpgs"]
    assert (vpg["vpg"], vpg["zvm_site"]) == ("dr-vpg", "hq")
    assert "dr" in vpg["tag_refusal"]
    assert zvm_cmds.status(["web-01"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert text.count("did not answer") == 1
    assert "site dr (the ZVM at" in captured.out
    assert zvm_cmds.checkpoints(["web-01", "--json"]) == 0
    assert [s["site"] for s in json.loads(capsys.readouterr().out)["unreachable_sites"]] == ["dr"]


def test_the_error_of_a_dark_site_is_printed_once(
    sims: dict[str, SimServer], capsys: pytest.CaptureFixture[str]
) -> None:
    sims["dr"].stop()
    assert cli_main(["tag", "web-01b", "--timeout", "20"]) == 1
    err = capsys.readouterr().err
    assert err.count("did not answer") == 1, err
