"""Test modules share helpers through helper modules (``*_helpers.py``, ``*_fakes.py``,
``conftest.py``, ``tests/support/``), never by importing one another: a helper kept in a
test module is private to it, and importing a test module runs its module-level code twice
under two names."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The fast lane's tests still import from test_gateway_fastlane.py (being reworked apart).
ALLOWED = {
    ("integration/gateway/test_gateway_fastlane_eras.py", "test_gateway_fastlane"),
    ("integration/gateway/test_gateway_fastlane_gates.py", "test_gateway_fastlane"),
}


def imported_test_modules(path: Path) -> set[str]:
    """The ``test_*`` modules ``path`` imports, by their last name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
        found |= {
            name.rsplit(".", 1)[-1] for name in names if name.rsplit(".", 1)[-1].startswith("test_")
        }
    return found


def test_no_test_module_imports_another() -> None:
    found = {
        (path.relative_to(TESTS).as_posix(), module)
        for path in TESTS.rglob("*.py")
        if "node_modules" not in path.parts
        for module in imported_test_modules(path)
    }
    assert found <= ALLOWED, sorted(found - ALLOWED)
