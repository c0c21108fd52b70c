"""Edges of core/cadence.py the table tests leave open (found by mutation testing)."""

from __future__ import annotations

import pytest

from zerto_rewind.core.cadence import expected_landing, observed_cadence, resolve_cadence


def test_a_checkpoint_exactly_one_cadence_after_the_request_is_projected_from() -> None:
    """Seen at requested + cadence (not later): the grid it sets is used, so the boundary is
    the one after the request on that grid, not simply requested + cadence."""
    assert expected_landing(100.0, 105.0, 5.0, 0.0) == pytest.approx(110.0, abs=1e-9)
    assert expected_landing(100.0, 105.1, 5.0, 0.0) == pytest.approx(105.0, abs=1e-9)


def test_only_the_twenty_most_recent_gaps_count() -> None:
    """21 checkpoints make 20 gaps (ten of 5 s, ten of 6 s: median 5.5); an older, longer
    gap does not count."""
    stamps = [0.0, 100.0]
    for gap in [5.0] * 10 + [6.0] * 10:
        stamps.append(stamps[-1] + gap)
    assert observed_cadence(stamps) == pytest.approx(5.5, abs=1e-9)


def test_a_sub_second_observed_cadence_is_used() -> None:
    picked = resolve_cadence(
        "v", 0.5, "vcenter", overrides={}, site_defaults={"vcenter": 5.0, "unknown": 630.0}
    )
    assert (picked.seconds, picked.source) == (0.5, "observed")
