"""Helpers shared by several test folders: ``from support.sim import sim_fixture``.

pytest runs with ``--import-mode=importlib`` and ``tests/`` on its path
(pyproject.toml), so these import as ``support.…``; a helper that one folder
alone uses stays in that folder (``from e2e.harness import …``). See docs/testing.md.
"""
