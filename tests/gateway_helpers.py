"""The gateway test helpers' old bare import name: they live in integration/gateway/.

Temporary: kept only until tests/integration/gateway/test_install_mcp_host.py
imports ``integration.gateway.gateway_helpers``, then deleted.
"""

from integration.gateway.gateway_helpers import actions, gateway_process, stand_in_upstream, text_of

__all__ = ["actions", "gateway_process", "stand_in_upstream", "text_of"]
