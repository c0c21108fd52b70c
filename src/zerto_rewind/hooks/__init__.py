"""The hooks: the doors that agent hosts run before (and after) each tool call.

May import ``core``, ``config``, ``zvm``, ``service_client`` and the base modules.
Never another door or ``cli``. Import-free itself: the hook's read-only path passes
through.
"""
