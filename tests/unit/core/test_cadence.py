"""A VPG's journal cadence and a tag's expected landing (cadence.py)."""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from zerto_rewind.config.settings import DEFAULT_SITE_CADENCE_S
from zerto_rewind.core.cadence import (
    Cadence,
    expected_landing,
    observed_cadence,
    overdue_after,
    resolve_cadence,
)

T0 = 1_700_000_000.0
_SETTINGS = settings(max_examples=200, deadline=None, database=None)

# ------------------------------------------------------------------ observed_cadence


@pytest.mark.parametrize("stamps", [[], [T0], [T0, T0 + 5], [T0, T0, T0 + 5], [T0] * 10])
def test_too_few_gaps_is_unknown(stamps: list[float]) -> None:
    """Fewer than two distinct gaps give no observed cadence."""
    assert observed_cadence(stamps) is None


def test_regular_journal() -> None:
    """Checkpoints every 5 s give 5 s, in any order."""
    stamps = [T0 + 5 * i for i in range(10)]
    random.Random(1).shuffle(stamps)
    assert observed_cadence(stamps) == 5.0


def test_median_shrugs_off_outliers() -> None:
    """A missed checkpoint or an extra tag barely moves the median."""
    stamps = [T0 + 60 * i for i in range(8)] + [T0 + 60 * 8 + 120, T0 + 61]
    assert observed_cadence(stamps) == 60.0


def test_only_recent_gaps_count() -> None:
    """Only the most recent 20 gaps count: an old 5 s cadence is forgotten after a change."""
    old = [T0 + 5 * i for i in range(50)]
    new = [old[-1] + 60 * i for i in range(1, 22)]
    assert observed_cadence(old + new) == 60.0
    assert observed_cadence(old + new[:9]) == 5.0


def test_duplicate_timestamps_ignored() -> None:
    """Equal timestamps (a tag on the same checkpoint) add no zero gaps."""
    assert observed_cadence([T0, T0, T0 + 30, T0 + 30, T0 + 60]) == 30.0


# ------------------------------------------------------------------- resolve_cadence


def test_config_override_beats_everything() -> None:
    """A per-VPG config cadence wins over an observed one and the site default."""
    got = resolve_cadence(
        "VPG-A", 5.0, "aws", overrides={"VPG-A": 42.0}, site_defaults=DEFAULT_SITE_CADENCE_S
    )
    assert got == Cadence(42.0, "config")


def test_observed_beats_site_default() -> None:
    """Without an override, the observed spacing wins over the site kind's default."""
    got = resolve_cadence(
        "VPG-A", 34.0, "aws", overrides={"VPG-B": 1.0}, site_defaults=DEFAULT_SITE_CADENCE_S
    )
    assert got == Cadence(34.0, "observed")


@pytest.mark.parametrize(("kind", "seconds"), [("vcenter", 5.0), ("azure", 60.0), ("aws", 630.0)])
@pytest.mark.parametrize("observed", [None, 0.0, -3.0])
def test_site_default_when_nothing_observed(
    kind: str, seconds: float, observed: float | None
) -> None:
    """With no usable observation, the protected site's kind sets the cadence."""
    got = resolve_cadence(
        "VPG-A", observed, kind, overrides={}, site_defaults=DEFAULT_SITE_CADENCE_S
    )
    assert got == Cadence(seconds, f"site:{kind}")


def test_unlisted_site_kind_falls_back_to_unknown() -> None:
    """A site kind without a default uses the 'unknown' default, else 630 s."""
    got = resolve_cadence("V", None, "mars", overrides={}, site_defaults={"unknown": 99.0})
    assert got == Cadence(99.0, "site:mars")
    assert resolve_cadence("V", None, "mars", overrides={}, site_defaults={}).seconds == 630.0


# ------------------------------------------------------------------ expected_landing


def test_no_checkpoint_seen_waits_one_cadence() -> None:
    """With no checkpoint known, the tag is expected one cadence plus lag after the request."""
    assert expected_landing(T0, None, 60.0, 2.0) == T0 + 62.0


@pytest.mark.parametrize(
    ("last", "boundary"),
    [
        (T0 - 10, T0 + 50),  # mid-interval: next boundary of the grid
        (T0 - 60, T0 + 60),  # request exactly on a boundary: the following one
        (T0, T0 + 60),  # last checkpoint at the request instant
        (T0 - 130, T0 + 50),  # several intervals back: grid projected forward
        (T0 - 59.5, T0 + 0.5),
    ],
)
def test_next_boundary_projected_from_last_checkpoint(last: float, boundary: float) -> None:
    """The tag lands at the first journal boundary strictly after the request, plus lag."""
    # abs=: the default relative tolerance on epoch seconds is about ±1700 s.
    assert expected_landing(T0, last, 60.0, 3.0) == pytest.approx(boundary + 3.0, abs=1e-6)


def test_checkpoint_in_the_future_is_bounded() -> None:
    """A last checkpoint far ahead of the request (clock skew) falls back to one cadence."""
    assert expected_landing(T0, T0 + 1000, 5.0, 0.0) == T0 + 5.0


@_SETTINGS
@given(
    requested=st.floats(min_value=1e9, max_value=2e9),
    cadence=st.floats(min_value=0.5, max_value=3600),
    back=st.floats(min_value=0.0, max_value=50.0),
    lag=st.floats(min_value=0.0, max_value=60.0),
)
def test_landing_within_one_cadence_of_recent_checkpoint(
    requested: float, cadence: float, back: float, lag: float
) -> None:
    """With a recent past checkpoint, landing is after the request and ≤ one cadence + lag."""
    last = requested - back * cadence
    assume(last <= requested)
    landing = expected_landing(requested, last, cadence, lag)
    assert landing > requested
    assert landing - lag <= requested + cadence + 1e-3


@_SETTINGS
@given(
    requested=st.floats(min_value=1e9, max_value=2e9),
    cadence=st.floats(min_value=0.5, max_value=3600),
    last_offset=st.none() | st.floats(min_value=-1e5, max_value=1e5),
    lag=st.floats(min_value=0.0, max_value=60.0),
)
def test_landing_always_after_request(
    requested: float, cadence: float, last_offset: float | None, lag: float
) -> None:
    """Whatever the last checkpoint, a tag is never expected at or before its request."""
    last = None if last_offset is None else requested + last_offset
    landing = expected_landing(requested, last, cadence, lag)
    assert landing > requested
    assert landing - lag <= requested + 2 * cadence + 1e-3


@_SETTINGS
@given(
    requested=st.floats(min_value=1e9, max_value=2e9),
    cadence=st.floats(min_value=0.5, max_value=3600),
    steps=st.integers(min_value=0, max_value=40),
    phase=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
)
def test_landing_is_on_the_journal_grid(
    requested: float, cadence: float, steps: int, phase: float
) -> None:
    """The boundary (landing minus lag) lies on the grid of the last checkpoint."""
    last = requested - (steps + phase) * cadence
    boundary = expected_landing(requested, last, cadence, 0.0)
    periods = (boundary - last) / cadence
    assert periods == pytest.approx(round(periods), abs=1e-6)


# --------------------------------------------------------------------- overdue_after


@pytest.mark.parametrize(
    ("cadence", "factor", "minimum", "overdue"),
    [(5.0, 3.0, 60.0, 60.0), (60.0, 3.0, 60.0, 180.0), (630.0, 2.0, 60.0, 1260.0)],
)
def test_overdue_after(cadence: float, factor: float, minimum: float, overdue: float) -> None:
    """A tag is overdue factor × cadence after it was expected, never sooner than the minimum."""
    assert overdue_after(T0, cadence, factor=factor, minimum_s=minimum) == T0 + overdue
