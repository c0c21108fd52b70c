"""The record every doctor check returns: what was checked, how it went, what to do."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["Check", "Status"]

Status = Literal["pass", "fail", "warn"]


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report: what was checked, how it went, what to do."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        """The check as a JSON object."""
        return asdict(self)
