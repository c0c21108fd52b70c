"""``zerto-rewind demo`` end to end, with a shorter AWS cadence and budget: every row of the
decision table and the estate's rows (four ZVMs over TLS, real hook processes) get the
decision the demo promises, and it exits 0, as ``./scripts/demo`` needs."""

from __future__ import annotations

import pytest

from zerto_rewind.cli.demo import main


def test_the_demo_gets_every_row_it_promises(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--aws-cadence", "12", "--budget", "7"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "every row got the decision the table promises" in out
    for site in ("hq", "dr", "azure", "aws"):
        assert f"site {site} (" in out  # each ZVM of the estate is named with its URL
    assert "dr: dr-reports-aws 1" in out  # dr's VM was tagged on dr's ZVM, and only there
    assert "aws: aws-orders-hq 1" in out  # pending and retry share one tag
    assert "site dr dark: its VM" in out
