"""The error tree is whole: every exception the package defines is in it, and drawn.

Each module under ``zerto_rewind`` is imported and its classes collected, so a new
exception class cannot slip out of the tree (or out of the drawing in
``errors.py``) unnoticed.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import zerto_rewind
from zerto_rewind import errors
from zerto_rewind.errors import ConfigError, UsageError, ZertoRewindError, describe

# Exceptions that never leave the module raising them (errors.py lists them too).
PRIVATE_TO_THEIR_MODULE = {
    # stands in for json.JSONDecodeError on the hook's fast path; callers map it
    "zerto_rewind._fastjson.JSONDecodeError",
    # turned into an HTTP answer by the approvals page
    "zerto_rewind.gateway.approvals_web._FormError",
    # an index to rebuild, caught where it is raised
    "zerto_rewind.core.log_index._Invalid",
    # a body the fast lane will not read (a ValueError); it takes the full path
    "zerto_rewind.gateway.fastlane_wire.StrictJsonError",
}


def _modules() -> list[str]:
    names = [zerto_rewind.__name__]
    prefix = zerto_rewind.__name__ + "."
    names += [m.name for m in pkgutil.walk_packages(zerto_rewind.__path__, prefix)]
    return sorted(n for n in names if not n.endswith("__main__"))


def _exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for _attr, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
    return found


EXCEPTIONS = _exceptions()


def test_the_walk_finds_the_exceptions_outside_errors_py() -> None:
    """The walk reaches subpackages (else the checks below prove nothing)."""
    assert "zerto_rewind.errors.NotFound" in EXCEPTIONS
    assert "zerto_rewind.scan.client.ScanError" in EXCEPTIONS
    assert "zerto_rewind.sim.errors.SimError" in EXCEPTIONS


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
def test_every_exception_is_in_the_tree_or_private(name: str) -> None:
    """Each exception class is a ZertoRewindError, or on the short list of module-private ones."""
    assert issubclass(EXCEPTIONS[name], ZertoRewindError) or name in PRIVATE_TO_THEIR_MODULE, (
        f"{name} is outside the error tree: subclass ZertoRewindError (and draw it in "
        "errors.py), or list it as private to its module here and in errors.py"
    )


def test_the_private_list_is_current() -> None:
    """A private exception that was removed or moved leaves the allow-list too."""
    assert set(EXCEPTIONS) >= PRIVATE_TO_THEIR_MODULE


def test_the_drawing_names_every_class_of_the_tree_and_every_private_one() -> None:
    """errors.py's docstring draws each class of the tree and names each private exception."""
    doc = errors.__doc__ or ""
    drawn = set(re.findall(r"[├└]── (\w+)", doc))
    in_tree = {cls.__name__ for cls in EXCEPTIONS.values() if issubclass(cls, ZertoRewindError)}
    assert drawn == in_tree - {"ZertoRewindError"}
    for name in PRIVATE_TO_THEIR_MODULE:
        assert name.rpartition(".")[2] in doc, name


def test_the_drawing_puts_each_class_under_its_parent() -> None:
    """The indentation of the drawing matches the real base classes."""
    doc = errors.__doc__ or ""
    by_name = {cls.__name__: cls for cls in EXCEPTIONS.values()}
    parents: list[str] = ["ZertoRewindError"]
    for line in doc.splitlines():
        match = re.match(r"\s*((?:[│ ] {3})*)[├└]── (\w+)", line)
        if not match:
            continue
        depth = len(match.group(1)) // 4 + 1
        name = match.group(2)
        del parents[depth:]
        assert by_name[name].__bases__[0].__name__ == parents[-1], name
        parents.append(name)


def _drawn_modules() -> dict[str, str]:
    """Each drawn class → the module the drawing puts it in (``errors`` when it names none)."""
    doc = errors.__doc__ or ""
    found: dict[str, str] = {}
    for line in doc.splitlines():
        match = re.search(r"[├└]── (\w+)\s.*?(?:\(([\w.]+)(?:;[^)]*)?\))?\s*$", line)
        if match:
            found[match.group(1)] = match.group(2) or "errors"
    return found


def test_each_class_of_the_tree_is_defined_once() -> None:
    """One name, one class: a second definition would make the drawing ambiguous."""
    names = [cls.__name__ for cls in EXCEPTIONS.values() if issubclass(cls, ZertoRewindError)]
    twice = sorted({name for name in names if names.count(name) > 1})
    assert twice == []


@pytest.mark.parametrize(
    "name", sorted(n for n, c in EXCEPTIONS.items() if issubclass(c, ZertoRewindError))
)
def test_the_drawing_names_the_module_each_class_is_defined_in(name: str) -> None:
    """The module after a drawn class (or ``errors`` for none) is the one defining it."""
    cls = EXCEPTIONS[name]
    if cls is ZertoRewindError:
        return
    drawn = _drawn_modules()[cls.__name__]
    actual = cls.__module__.removeprefix(zerto_rewind.__name__ + ".")
    assert drawn == actual, f"errors.py draws {cls.__name__} in {drawn}; it lives in {actual}"


def test_advice_follows_the_first_semicolon() -> None:
    """A message's advice comes after its first '; ', and describe() shows it after a dash."""
    error = ConfigError("missing; set ZVM_URL", key="zvm.url")
    assert error.problem == "environment: zvm.url: missing"
    assert error.advice == "set ZVM_URL"
    assert describe(error) == "ConfigError: environment: zvm.url: missing — set ZVM_URL"
    assert describe(UsageError("no VM named 'x'")) == "UsageError: no VM named 'x'"
