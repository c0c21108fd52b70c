"""What the install commands share: the hook options (claude-code and claude-plugin),
``--json``, and the options record built from the parsed arguments."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, TypeVar

from ..hostconfig.install.settings_file import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "add_hook_arguments",
    "add_json_argument",
    "add_service_arguments",
    "add_target_arguments",
    "options_from",
]

_Options = TypeVar("_Options", bound="DataclassInstance")


def options_from(cls: type[_Options], args: argparse.Namespace) -> _Options:
    """An installer's options (``cls``, a dataclass) from the parsed arguments of the same
    names; a repeatable option's list becomes the field's tuple."""
    values = {field.name: getattr(args, field.name) for field in dataclasses.fields(cls)}
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def add_hook_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every hook install shares: the config, the host's timeout, --all-tools."""
    parser.add_argument(
        "--config", metavar="PATH", help="the zerto-rewind config (default: ZERTO_REWIND_CONFIG)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"the host's hook timeout in seconds (default {DEFAULT_TIMEOUT_S})",
    )
    parser.add_argument(
        "--all-tools",
        action="store_true",
        help="run the hook for every tool that is not read-only, not just the catalog's servers",
    )


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json``: every install target's summary as one JSON object on stdout."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="print what was (or, with --dry-run, would be) written as one JSON object",
    )


def add_service_arguments(
    target: argparse._ActionsContainer,
    *,
    required: bool,
    service: str,
    service_user: str,
    agent_user: str,
) -> None:
    """The thin hook's flags: which guard service it asks, and how it trusts it (the first
    three helps are each installer's own)."""
    target.add_argument("--service", required=required, metavar="URL", help=service)
    target.add_argument("--service-user", metavar="NAME|UID", help=service_user)
    target.add_argument("--agent-user", metavar="NAME", help=agent_user)
    target.add_argument("--token-file", metavar="F", help="with https: the bearer token's file")
    target.add_argument("--ca-file", metavar="F", help="with https: the CA bundle to trust")


def add_target_arguments(
    parser: argparse.ArgumentParser, *, required: bool, project: str, user: str
) -> argparse._MutuallyExclusiveGroup:
    """Which file an installer writes: ``--project DIR`` or ``--user`` (the helps are each
    installer's own); the caller adds its other choices (``--file``, ``--managed``)."""
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument("--project", metavar="DIR", help=project)
    where.add_argument("--user", action="store_true", help=user)
    return where
