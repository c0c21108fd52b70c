"""Where a secret value stands in a text: only as a whole token.

A secret is replaced where it stands alone, never inside a longer word or a path
component: with a password ``user``, ``/home/newuser/redis.sock`` stays as it is.
The upstream logs' redactor and the Redis errors' text both find secrets this way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["whole_tokens"]


def whole_tokens(values: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern matching any of ``values`` as a whole token; None when there are none.

    Longest first, so a secret that contains another is matched whole.
    """
    ordered = sorted({value for value in values if value}, key=len, reverse=True)
    if not ordered:
        return None
    alternatives = "|".join(re.escape(value) for value in ordered)
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)")
