"""`zerto-rewind status | checkpoints | tag` against the simulator."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from zerto_rewind.cli import main as cli_main
from zerto_rewind.cli import zvm_cmds


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep rich tables on one line per row."""
    monkeypatch.setenv("COLUMNS", "250")


def test_status_json(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """status --json reports the VPG, site kind, health, cadence and latest checkpoint."""
    assert zvm_cmds.status(["jp-ubuntu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (vpg,) = report["vpgs"]
    assert (vpg["vpg"], vpg["site_kind"], vpg["status_name"]) == (
        "jp-local",
        "vcenter",
        "MeetingSLA",
    )
    assert vpg["cadence_source"] == "observed"
    assert vpg["cadence_s"] == pytest.approx(1.0, abs=0.2)
    assert vpg["latest_checkpoint"]["id"]
    assert vpg["tag_refusal"] is None


def test_status_table_multi(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """status prints one row per VPG of a VM in two VPGs."""
    assert zvm_cmds.status(["multi-1"]) == 0
    out = capsys.readouterr().out
    assert "multi-a" in out
    assert "multi-b" in out


def test_status_table_paused_explains(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """status on a paused VPG shows why it cannot take a tag."""
    assert zvm_cmds.status(["sql-paused-1"]) == 0
    assert "replication is paused" in capsys.readouterr().out


def test_unknown_vm_exit_1(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown VM prints NotFound with the name and exits 1."""
    assert cli_main(["status", "ghost-vm"]) == 1
    err = capsys.readouterr().err
    assert "NotFound" in err
    assert "ghost-vm" in err


def test_tag_lands_and_is_listed(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tag waits for the tag to land and prints it; checkpoints --tagged lists it."""
    assert zvm_cmds.tag(["jp-ubuntu", "--name", "cli-tag-1", "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert "cli-tag-1" in out
    assert "jp-local" in out
    assert zvm_cmds.checkpoints(["jp-ubuntu", "--since", "5m", "--tagged", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["checkpoints"]
    assert [c["tag"] for c in listed] == ["cli-tag-1"]


def test_tag_paused_refused_fast(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """tag on a paused VPG exits 1 within seconds with the reason."""
    start = time.monotonic()
    assert cli_main(["tag", "sql-paused-1", "--timeout", "60"]) == 1
    assert time.monotonic() - start < 5
    assert "resume replication" in capsys.readouterr().err


def test_tag_timeout_says_pending(
    cli_env: Path, control: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tag that has not landed by --timeout exits 1 saying it may still land."""
    response = control.post("/_sim/vpgs/CMH-AWS-1/cadence", json={"seconds": 60})
    assert response.status_code < 300, response.text
    assert cli_main(["tag", "win2019-1", "--name", "slow", "--timeout", "3"]) == 1
    err = capsys.readouterr().err
    assert "ZvmTimeout" in err
    assert "may still land" in err


def test_checkpoints_table(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """checkpoints prints a table of recent checkpoints."""
    assert zvm_cmds.checkpoints(["jp-ubuntu", "--since", "10s"]) == 0
    out = capsys.readouterr().out
    assert "jp-local" in out
    assert "UTC" in out


def test_checkpoints_bad_since(cli_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --since that is neither a duration nor a time is a usage error (exit 2)."""
    with pytest.raises(SystemExit) as info:
        zvm_cmds.checkpoints(["jp-ubuntu", "--since", "last tuesday"])
    assert info.value.code == 2
    assert "neither a duration" in capsys.readouterr().err


def test_every_command_takes_config_and_tag_takes_its_text(
    cli_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--config on status, checkpoints and tag; `tag VM TEXT`; `tag --json`; plain progress
    lines naming the VM when stderr is not a terminal."""
    monkeypatch.delenv("ZERTO_REWIND_CONFIG")
    config = ["--config", str(cli_env)]
    assert cli_main(["status", "jp-ubuntu", *config, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unreachable_sites"] == []
    assert cli_main(["tag", "jp-ubuntu", "before the patch", *config, "--json"]) == 0
    captured = capsys.readouterr()
    landed = json.loads(captured.out)
    assert (landed["vm"], landed["tag"]) == ("jp-ubuntu", "before the patch")
    ((one),) = landed["landed"]
    assert (one["vpg"], one["checkpoint"]["tag"]) == ("jp-local", "before the patch")
    assert one["expected_s"] >= 0
    assert "VM jp-ubuntu, VPG jp-local: " in captured.err
    assert "the tag landed after" in captured.err
    assert cli_main(["checkpoints", "jp-ubuntu", *config, "--tagged", "--json"]) == 0
    tags = [c["tag"] for c in json.loads(capsys.readouterr().out)["checkpoints"]]
    assert tags == ["before the patch"]


def test_tag_text_twice_differently_is_a_usage_error(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        zvm_cmds.tag(["jp-ubuntu", "one", "--name", "two"])
    assert info.value.code == 2
    assert "give the tag text once" in capsys.readouterr().err


def test_the_timeout_names_the_vm(
    cli_env: Path, control: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    """The timeout's advice is a command to paste: the VM's own name, not a literal VM."""
    response = control.post("/_sim/vpgs/CMH-AWS-1/cadence", json={"seconds": 60})
    assert response.status_code < 300, response.text
    assert cli_main(["tag", "win2019-1", "slow", "--timeout", "3"]) == 1
    err = capsys.readouterr().err
    assert "for VM 'win2019-1'" in err
    assert "`zerto-rewind checkpoints win2019-1 --tagged`" in err
    assert "checkpoints VM " not in err
