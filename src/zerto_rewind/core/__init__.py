"""The policy core: the decision table and the life of a checkpoint tag.

Classification of a call (``catalog``), the table (``guard``, ``decision``),
the tag lifecycle (the rules, free of IO: ``tag_rules`` in the words of
``tag_actions``; carried out by ``tagging`` with ``tag_plan``; ``cadence``), shared
state (``state``; in Redis for gateway replicas, ``state_redis``; ``state_store``
picks), approval requests that wait for a person (``approvals``, the policy, over
``approvals_model``; stores keep ``approvals_store``'s protocol: ``approvals_file``,
``approvals_redis``; their log lines: ``approvals_log``), the
decision log (``decisions_log``, hash-chained) and its reconciliation (``reconcile``).

May import: ``config``, ``zvm``, and the base modules (``errors``, ``fsutil``,
``_fastjson``). Never a door (``claude_code``, ``mcp_server``), ``recovery``
or ``cli``. Import-free itself: the hook's read-only path loads ``catalog``.
"""
