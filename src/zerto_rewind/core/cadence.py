"""A VPG's journal cadence, and when a requested tag should land. Pure.

A tag surfaces at the VPG's next journal checkpoint; the protected site sets
the spacing (about 5 s for vSphere, 60 s Azure, 630 s AWS). Waiting a fixed
time is what produced the seed's false denials, so the guard asks this module
how long *this* VPG needs.

Where the cadence comes from, strongest first: a config override for the VPG,
the observed spacing of its recent checkpoints, the default for its
protected-site kind.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Cadence", "expected_landing", "observed_cadence", "overdue_after", "resolve_cadence"]

# Enough gaps for a median that shrugs off a tag or a missed checkpoint.
_RECENT_GAPS = 20
_MIN_GAPS = 2


@dataclass(frozen=True)
class Cadence:
    """Seconds between a VPG's checkpoints, and where that figure came from."""

    seconds: float
    source: str  # "config" | "observed" | "site:<kind>"


def observed_cadence(timestamps: Sequence[float]) -> float | None:
    """Median spacing of the most recent checkpoints (epoch seconds), or None if too few."""
    ordered = sorted(timestamps)[-(_RECENT_GAPS + 1) :]
    gaps = [b - a for a, b in itertools.pairwise(ordered) if b > a]
    if len(gaps) < _MIN_GAPS:
        return None
    return statistics.median(gaps)


def resolve_cadence(
    vpg_name: str,
    observed: float | None,
    site_kind: str,
    *,
    overrides: Mapping[str, float],
    site_defaults: Mapping[str, float],
) -> Cadence:
    """Pick the cadence to plan with: config override > observed > site default."""
    if vpg_name in overrides:
        return Cadence(overrides[vpg_name], "config")
    if observed is not None and observed > 0:
        return Cadence(observed, "observed")
    fallback = site_defaults.get(site_kind, site_defaults.get("unknown", 630.0))
    return Cadence(fallback, f"site:{site_kind}")


def expected_landing(
    requested_at: float, last_checkpoint_at: float | None, cadence_s: float, lag_s: float
) -> float:
    """When a tag requested at ``requested_at`` should be listable (epoch seconds).

    The next journal boundary after the request, projected from the last seen
    checkpoint, plus the lag this VPG has shown between boundary and listing.
    """
    if last_checkpoint_at is None or last_checkpoint_at > requested_at + cadence_s:
        boundary = requested_at + cadence_s
    else:
        steps = max(1, math.ceil((requested_at - last_checkpoint_at) / cadence_s))
        boundary = last_checkpoint_at + steps * cadence_s
        if boundary <= requested_at:
            boundary += cadence_s
    return boundary + lag_s


def overdue_after(
    expected_at: float, cadence_s: float, *, factor: float, minimum_s: float
) -> float:
    """When a tag that has not landed counts as failed: well past any plausible landing."""
    return expected_at + max(factor * cadence_s, minimum_s)
