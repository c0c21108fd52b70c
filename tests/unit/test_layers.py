"""The folders are layers: the import graph of src/, read with ast, points one way.

Every import counts, including those inside functions and under TYPE_CHECKING:
a lazy import is still a dependency, and a cycle hidden in a function body is
still a cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "zerto_rewind"

# Lower ranks are imported by higher ones, never the other way round. Two
# modules of equal rank in different folders must not import each other
# either: doors stand side by side, and so do zvm and sim.
RANKS: dict[str, int] = {
    "errors": 0,
    "_fastjson": 0,
    "hook_flags": 0,
    "netutil": 0,
    "redaction": 0,
    "fsutil": 1,
    "fsaccess": 1,
    "service_client": 1,
    "config": 2,
    "zvm": 3,
    "sim": 3,
    "hostconfig": 3,
    # The installers write the doors' hooks into the hosts' files: they sit above
    # the doors they install, while the rest of hostconfig stays low.
    "hostconfig.install": 7,
    "core": 4,
    "recovery": 5,
    "scan": 5,
    "hooks": 6,
    "mcp_server": 6,
    "gateway": 6,
    # The public test harness: a sandbox runs the hook as a host does.
    "testing": 7,
    # The import paths installed hook commands name, kept as re-exports of `hooks`.
    "claude_code": 7,
    "agent_hooks": 7,
    "cli": 8,
    # The package root and `python -m zerto_rewind` sit on top.
    "__init__": 9,
    "__main__": 9,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def folder(module: str) -> str:
    """The folder (layer) a module belongs to: its top-level folder, or a ranked subfolder."""
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in RANKS:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path) -> set[str]:
    """Absolute names of every zerto_rewind module imported anywhere in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(PACKAGE))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if not target.startswith(PACKAGE):
                continue
            # `from . import host` imports a module, not a name of the package
            submodules = {f"{target}.{a.name}" for a in node.names} & MODULES
            found.update(submodules or {target})
    found.discard(name)
    return found


MODULES = {module_name(p) for p in SRC.rglob("*.py")}
GRAPH = {module_name(p): imports_of(p) for p in SRC.rglob("*.py")}


def test_every_folder_has_a_rank() -> None:
    """A new folder must be placed in the layer order before it can be imported."""
    assert {folder(m) for m in MODULES} <= set(RANKS)


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module: str) -> None:
    """A module imports only its own folder or lower layers; never up, never a sibling door."""
    mine = folder(module)
    bad = [
        target
        for target in sorted(GRAPH[module])
        if folder(target) != mine and RANKS[folder(target)] >= RANKS[mine]
    ]
    assert bad == [], f"{module} imports {bad}: the layer order is {RANKS}"


def test_core_knows_no_door() -> None:
    """The policy core imports no host adapter, no MCP, no CLI (the whole closure)."""
    seen: set[str] = set()
    todo = [m for m in GRAPH if folder(m) == "core"]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo.extend(GRAPH.get(current, ()))
    reached = {folder(m) for m in seen}
    doors = {"hooks", "claude_code", "agent_hooks", "mcp_server", "gateway", "cli", "recovery"}
    doors.add("sim")
    assert reached.isdisjoint(doors), reached


def test_no_import_cycles() -> None:
    """No module reaches itself through its imports (package __init__ re-exports included)."""
    state: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(GRAPH.get(node, ())):
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_checker_sees_a_cycle_and_an_upward_import(tmp_path: Path) -> None:
    """The graph reader resolves relative imports, lazy ones included (else it proves nothing)."""
    assert "zerto_rewind.core.catalog" in GRAPH["zerto_rewind.hooks.standalone"]
    # a function-level import is an edge too
    assert "zerto_rewind.config.parser" in GRAPH["zerto_rewind.config.loader"]
    # `from . import host as claude_code` names a module
    assert "zerto_rewind.hooks.claude_code" in GRAPH["zerto_rewind.hooks.standalone"]
    assert "zerto_rewind.zvm.client" in GRAPH["zerto_rewind.core.guard_estate"]


def test_every_folder_says_what_it_may_import() -> None:
    """Each subpackage opens with a docstring that names what lives there and its imports."""
    for init in SRC.joinpath(PACKAGE).glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "import" in doc.lower(), f"{init.parent.name}/__init__.py: say what it may import"
