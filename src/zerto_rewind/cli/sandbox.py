"""The sandbox's old import path: it moved to :mod:`zerto_rewind.testing`.

Temporary: kept only until the last test that imports it from here is switched
over (tests/integration/gateway/test_install_mcp_host.py), then deleted.
"""

from __future__ import annotations

from ..testing import Sandbox

__all__ = ["Sandbox"]
