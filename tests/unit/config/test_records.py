"""Section settings are frozen records: typed keyword-only fields, a typo is an error."""

from __future__ import annotations

from typing import Any

import pytest

from zerto_rewind.config.catalog_settings import ResolverSpec
from zerto_rewind.config.sections import (
    DEFAULT_SITE_CADENCE_S,
    ApprovalsSettings,
    GatewaySettings,
    GuardSettings,
    LimitsSettings,
    LogAnchorSettings,
    StateRedisSettings,
    UpstreamSettings,
)

RECORDS = [
    GuardSettings,
    GatewaySettings,
    LimitsSettings,
    ApprovalsSettings,
    LogAnchorSettings,
    StateRedisSettings,
    UpstreamSettings,
    ResolverSpec,
]


@pytest.mark.parametrize("record", RECORDS)
def test_a_misspelt_keyword_raises_type_error(record: Any) -> None:
    """A keyword that is no field raises TypeError naming it, instead of taking the default."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'on_pendng'"):
        record(on_pendng="prompt")


def test_the_guard_misspelling_of_the_issue_is_refused() -> None:
    """GuardSettings(on_pendng=...) no longer silently gives on_pending 'deny'."""
    with pytest.raises(TypeError, match=r"GuardSettings\(\) got an unexpected keyword"):
        GuardSettings(on_pendng="prompt")  # type: ignore[call-arg]
    assert GuardSettings(on_pending="prompt").on_pending == "prompt"


@pytest.mark.parametrize("record", RECORDS)
def test_fields_are_keyword_only(record: Any) -> None:
    """A positional argument is refused: every field is named at the call."""
    with pytest.raises(TypeError):
        record(1)


def test_a_record_is_frozen() -> None:
    """Setting or deleting a field raises: a section's settings never change once parsed."""
    guard = GuardSettings()
    with pytest.raises(AttributeError, match="frozen"):
        guard.max_tags_per_minute = 3  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        del guard.tag_prefix
    assert guard.max_tags_per_minute == 6


def test_defaults_and_a_mutable_default_is_never_shared() -> None:
    """Unset fields take the declared default; a dict default is a fresh copy per instance."""
    one, two = GatewaySettings(), GatewaySettings()
    assert (one.max_body_bytes, one.limits.sessions, one.tls_cert) == (1_000_000, 1024, None)
    assert one.clients == {}
    assert one.clients is not two.clients
    guard = GuardSettings()
    assert guard.site_cadence_s == DEFAULT_SITE_CADENCE_S
    assert guard.site_cadence_s is not DEFAULT_SITE_CADENCE_S


def test_a_subclass_keeps_its_bases_fields() -> None:
    """A record derived from another takes both its fields and its own."""

    class Wider(LogAnchorSettings):
        extra: int = 2

    wide = Wider(every_lines=5, extra=3)
    assert (wide.every_lines, wide.every_s, wide.extra) == (5, 60.0, 3)
    with pytest.raises(TypeError, match="'nope'"):
        Wider(nope=1)  # type: ignore[call-arg]
