#!/usr/bin/env python3
"""The size guardrails of src/: modules under 500 lines, functions under 60, bounded complexity.

    python scripts/guardrails.py            check; exit 1 with one line per finding
    python scripts/guardrails.py --shrink   lower the allow-lists to today's sizes (never raise)

What is over a limit today is listed in scripts/guardrails.toml with its size, and the list
may only shrink: a listed module or function that grew past its recorded size fails, one that
shrank must have its number lowered (``--shrink`` does it), and one back under the limit must
leave the list. Anything over a limit and not listed fails.

Ruff checks complexity (C901, PLR0915; the bounds are in pyproject.toml). Its current
offenders are listed file by file in ``[tool.ruff.lint.per-file-ignores]``; this script fails
for a listed file that no longer needs its entry, so that list only shrinks as well.

Run by scripts/check and scripts/test; tests/unit/test_guardrails.py tests it.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOW = "scripts/guardrails.toml"
MODULE_LIMIT = 500  # a module may have at most this many lines
FUNCTION_LIMIT = 60  # a function must be shorter than this
RATCHETED_RULES = ("C901", "PLR0915")


def module_sizes(root: Path) -> dict[str, int]:
    """Every module under src/ → its line count, keyed by its path from ``root``."""
    return {
        path.relative_to(root).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted((root / "src").rglob("*.py"))
    }


def function_sizes(root: Path) -> dict[str, int]:
    """Every function under src/ → its length from ``def`` to its last line (``path::qualname``)."""
    sizes: dict[str, int] = {}
    for path in sorted((root / "src").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        name = path.relative_to(root).as_posix()
        for qualname, node in _functions(tree, ""):
            sizes[f"{name}::{qualname}"] = (node.end_lineno or node.lineno) - node.lineno + 1
    return sizes


def _functions(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.AST]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            qualname = prefix + child.name
            if not isinstance(child, ast.ClassDef):
                yield qualname, child
            yield from _functions(child, qualname + ".")
        else:
            yield from _functions(child, prefix)


def ratchet(kind: str, sizes: dict[str, int], allowed: dict[str, int], over: int) -> list[str]:
    """Findings for one allow-list: ``over`` is the first size that breaks the limit."""
    findings = []
    for name, size in sorted(sizes.items()):
        recorded = allowed.get(name)
        if size >= over and recorded is None:
            findings.append(f"{name}: {kind} of {size} lines; split it (limit {over - 1})")
        elif recorded is not None and size > recorded:
            findings.append(f"{name}: {kind} grew to {size} lines, past its listed {recorded}")
        elif recorded is not None and size < over:
            findings.append(f"{name}: {kind} is {size} lines now; remove it from {ALLOW}")
        elif recorded is not None and size < recorded:
            findings.append(f"{name}: {kind} shrank to {size}; lower it in {ALLOW} (--shrink)")
    findings += [
        f"{name}: listed in {ALLOW} but gone" for name in sorted(set(allowed) - set(sizes))
    ]
    return findings


def stale_ruff_ignores(root: Path) -> list[str]:
    """Per-file ignores of the complexity rules that the file no longer needs."""
    lint = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"][
        "lint"
    ]
    bounds = [
        f"lint.mccabe.max-complexity = {lint['mccabe']['max-complexity']}",
        f"lint.pylint.max-statements = {lint['pylint']['max-statements']}",
    ]
    findings = []
    for pattern, rules in sorted(lint.get("per-file-ignores", {}).items()):
        for rule in sorted(set(rules) & set(RATCHETED_RULES)):
            if not _ruff_finds(root, pattern, rule, bounds):
                findings.append(f"{pattern}: meets {rule} now; drop it from per-file-ignores")
    return findings


def _ruff_finds(root: Path, path: str, rule: str, bounds: list[str]) -> bool:
    command = [sys.executable, "-m", "ruff", "check", "--isolated", "--quiet", "--select", rule]
    for bound in bounds:
        command += ["--config", bound]
    done = subprocess.run([*command, path], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        msg = f"ruff failed on {path}: {done.stderr.strip()}"
        raise SystemExit(msg)
    return done.returncode == 1


def check(root: Path) -> list[str]:
    """Every finding in the tree at ``root``; none means it passes."""
    allow = tomllib.loads((root / ALLOW).read_text(encoding="utf-8"))
    return [
        *ratchet("module", module_sizes(root), allow.get("modules", {}), MODULE_LIMIT + 1),
        *ratchet("function", function_sizes(root), allow.get("functions", {}), FUNCTION_LIMIT),
        *stale_ruff_ignores(root),
    ]


def shrink(root: Path) -> None:
    """Rewrite the allow-lists with today's sizes where those are lower; never raise one."""
    allow = tomllib.loads((root / ALLOW).read_text(encoding="utf-8"))
    tables = {
        "modules": (module_sizes(root), MODULE_LIMIT + 1),
        "functions": (function_sizes(root), FUNCTION_LIMIT),
    }
    # The comment at the top stays; the tables are written anew.
    lines = (root / ALLOW).read_text(encoding="utf-8").splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
    text = "".join(line + "\n" for line in lines[:header]).rstrip("\n") + "\n"
    for table, (sizes, over) in tables.items():
        kept = {
            name: min(recorded, sizes[name])
            for name, recorded in allow.get(table, {}).items()
            if sizes.get(name, 0) >= over
        }
        text += f"\n[{table}]\n" + "".join(f'"{n}" = {s}\n' for n, s in sorted(kept.items()))
    (root / ALLOW).write_text(text.lstrip("\n"), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--shrink", action="store_true", help="lower the allow-lists")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.shrink:
        shrink(args.root)
    findings = check(args.root)
    for finding in findings:
        sys.stderr.write(f"guardrails: {finding}\n")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
