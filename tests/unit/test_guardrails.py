"""scripts/guardrails.py: size limits whose allow-lists may only shrink, on a made-up tree."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("guardrails", REPO / "scripts" / "guardrails.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["guardrails"] = module
    spec.loader.exec_module(module)
    return module


guardrails = _load()


def _function(name: str, lines: int) -> str:
    """A function of exactly ``lines`` lines."""
    return f"def {name}() -> None:\n" + "    pass\n" * (lines - 1)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A checkout with this repo's ruff settings, one module and empty allow-lists."""
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "scripts").mkdir()
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "scripts" / "guardrails.toml").write_text("[modules]\n\n[functions]\n")
    (tmp_path / "src" / "pkg" / "small.py").write_text(_function("short", 59))
    return tmp_path


def _allow(tree: Path, modules: str = "", functions: str = "") -> None:
    text = f"[modules]\n{modules}\n[functions]\n{functions}\n"
    (tree / "scripts" / "guardrails.toml").write_text(text)


def _ruff_clean(findings: list[str]) -> list[str]:
    """The findings about this made-up tree (the copied pyproject names the repo's files)."""
    return [f for f in findings if "per-file-ignores" not in f]


def test_a_tree_within_the_limits_passes(tree: Path) -> None:
    """500 lines and a 59-line function are within the limits."""
    (tree / "src" / "pkg" / "edge.py").write_text("x = 1\n" * 500)
    assert _ruff_clean(guardrails.check(tree)) == []


def test_an_unlisted_big_module_or_long_function_fails(tree: Path) -> None:
    """501 lines, or a function of 60, fails when not listed."""
    (tree / "src" / "pkg" / "big.py").write_text("x = 1\n" * 501)
    (tree / "src" / "pkg" / "long.py").write_text(_function("long", 60))
    assert _ruff_clean(guardrails.check(tree)) == [
        "src/pkg/big.py: module of 501 lines; split it (limit 500)",
        "src/pkg/long.py::long: function of 60 lines; split it (limit 59)",
    ]


def test_a_listed_module_may_not_grow(tree: Path) -> None:
    """A listed module past its recorded size fails, naming both sizes."""
    (tree / "src" / "pkg" / "big.py").write_text("x = 1\n" * 520)
    _allow(tree, modules='"src/pkg/big.py" = 510')
    assert _ruff_clean(guardrails.check(tree)) == [
        "src/pkg/big.py: module grew to 520 lines, past its listed 510"
    ]


def test_a_listed_module_that_shrank_must_be_lowered_or_removed(tree: Path) -> None:
    """The list follows a shrink: a lower number, or no entry once under the limit."""
    (tree / "src" / "pkg" / "big.py").write_text("x = 1\n" * 505)
    (tree / "src" / "pkg" / "fixed.py").write_text("x = 1\n" * 400)
    (tree / "src" / "pkg" / "nested.py").write_text(
        "class Box:\n    " + _function("method", 70).replace("\n", "\n    ").rstrip() + "\n"
    )
    _allow(
        tree,
        modules='"src/pkg/big.py" = 510\n"src/pkg/fixed.py" = 600\n"src/pkg/gone.py" = 700',
        functions='"src/pkg/nested.py::Box.method" = 80',
    )
    assert _ruff_clean(guardrails.check(tree)) == [
        "src/pkg/big.py: module shrank to 505; lower it in scripts/guardrails.toml (--shrink)",
        "src/pkg/fixed.py: module is 400 lines now; remove it from scripts/guardrails.toml",
        "src/pkg/gone.py: listed in scripts/guardrails.toml but gone",
        "src/pkg/nested.py::Box.method: function shrank to 70; lower it in "
        "scripts/guardrails.toml (--shrink)",
    ]
    guardrails.shrink(tree)
    assert _ruff_clean(guardrails.check(tree)) == []
    allow = (tree / "scripts" / "guardrails.toml").read_text()
    assert '"src/pkg/big.py" = 505' in allow
    assert "fixed.py" not in allow
    assert '"src/pkg/nested.py::Box.method" = 70' in allow


def test_shrink_never_raises_a_number(tree: Path) -> None:
    """--shrink keeps a grown entry at its recorded size, so the check still fails."""
    (tree / "src" / "pkg" / "big.py").write_text("x = 1\n" * 520)
    _allow(tree, modules='"src/pkg/big.py" = 510')
    guardrails.shrink(tree)
    assert '"src/pkg/big.py" = 510' in (tree / "scripts" / "guardrails.toml").read_text()
    assert _ruff_clean(guardrails.check(tree)) != []


def test_a_complexity_ignore_the_file_no_longer_needs_fails(tree: Path) -> None:
    """A per-file C901 ignore on a simple file is reported, so that list only shrinks too."""
    pyproject = (tree / "pyproject.toml").read_text()
    entry = '"src/pkg/small.py" = ["C901"]\n'
    (tree / "pyproject.toml").write_text(
        pyproject.replace(
            "[tool.ruff.lint.per-file-ignores]\n", "[tool.ruff.lint.per-file-ignores]\n" + entry
        )
    )
    findings = guardrails.stale_ruff_ignores(tree)
    assert "src/pkg/small.py: meets C901 now; drop it from per-file-ignores" in findings


def test_this_repository_passes() -> None:
    """The tree as committed keeps to its limits and its allow-lists are current."""
    assert guardrails.check(REPO) == []
