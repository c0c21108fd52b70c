"""``Record``: a frozen value with typed, keyword-only fields, without importing dataclasses.

A section's settings declare each field once, as a class annotation with its default::

    class GuardSettings(Record):
        timeout_s: float = 150.0
        on_pending: str = "deny"

``GuardSettings(on_pendng="prompt")`` fails mypy (the class is a dataclass to a type
checker, through ``dataclass_transform``) and raises TypeError at run time; assigning a
field afterwards raises AttributeError. ``dataclasses`` itself is not used: it imports
``re`` and ``inspect``, and the hook builds these settings on every call.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, dataclass_transform
else:

    def dataclass_transform(**_options: object) -> object:
        """At run time the decorator only marks the class; type checkers read its options."""
        return lambda cls: cls


__all__ = ["Record"]

_REQUIRED = object()  # a field declared without a default


@dataclass_transform(kw_only_default=True, frozen_default=True, eq_default=False)
class Record:
    """A frozen record; its subclasses' annotated class attributes are its fields."""

    # name -> default (or _REQUIRED), for each subclass, its bases' fields first
    __fields__: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls) -> None:
        fields = dict(cls.__fields__)
        for name in cls.__annotations__:  # this class's own (not inherited since 3.10)
            if name != "__fields__":
                fields[name] = cls.__dict__.get(name, fields.get(name, _REQUIRED))
        cls.__fields__ = fields

    def __init__(self, **values: Any) -> None:
        fields = type(self).__fields__
        for name in values:
            if name not in fields:
                msg = f"{type(self).__name__}() got an unexpected keyword argument {name!r}"
                raise TypeError(msg)
        for name, default in fields.items():
            value = values.get(name, default)
            if value is _REQUIRED:
                msg = f"{type(self).__name__}() missing required keyword argument {name!r}"
                raise TypeError(msg)
            if value is default and isinstance(value, dict | list):
                value = value.copy()  # never share a mutable default between instances
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        msg = f"{type(self).__name__} is frozen: build a new one instead of setting {name}"
        raise AttributeError(msg)

    def __delattr__(self, name: str) -> None:
        msg = f"{type(self).__name__} is frozen: {name} cannot be deleted"
        raise AttributeError(msg)
