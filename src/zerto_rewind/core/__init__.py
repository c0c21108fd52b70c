"""The policy core: the decision table and the life of a checkpoint tag.

Classification of a call (``catalog``), the table (``guard``, ``decision``),
the tag lifecycle (``tagging``, ``cadence``), shared state (``state``; in
Redis for gateway replicas, ``state_redis``; ``state_store`` picks), approval
requests that wait for a person (``approvals``, ``approvals_redis``), the
decision log (``decisions_log``, hash-chained) and its reconciliation (``reconcile``).

May import: ``config``, ``zvm``, and the base modules (``errors``, ``fsutil``,
``_fastjson``). Never a door (``claude_code``, ``mcp_server``), ``recovery``
or ``cli``. Import-free itself: the hook's read-only path loads ``catalog``.
"""
