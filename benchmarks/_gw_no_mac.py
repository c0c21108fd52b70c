"""Benchmark only: ``zerto-rewind`` with the state's record MACs replaced by a pass-through.

``bench_mac.py`` starts one gateway through this launcher beside one started as
shipped, to measure what the MACs cost. The product has no switch to turn them
off; this file patches its own process only, and lives outside the package.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from zerto_rewind.core import record_mac


def _seal(self: record_mac.RecordMac, kind: str, ident: str, record: Mapping[str, Any]) -> Any:
    return dict(record)


def _open(self: record_mac.RecordMac, kind: str, ident: str, raw: Any) -> Any:
    return raw if isinstance(raw, dict) else None


# ``_gw_no_mac.py without ARGS…`` patches; ``_gw_no_mac.py with ARGS…`` runs as shipped,
# through the same launcher, so that the two gateways differ in the MACs only.
if sys.argv.pop(1) == "without":
    record_mac.RecordMac.seal = _seal  # type: ignore[method-assign]
    record_mac.RecordMac.open = _open  # type: ignore[method-assign]

from zerto_rewind.cli import main  # noqa: E402  (after the patch, which it must see)

sys.exit(main())
