"""What every zerto-rewind MCP tool shares: argument types, annotations, the runtime.

The runtime holds the settings and the guard (with it the estate: one ZVM client per
site), created on first use; every tool hands the guard to the library, which finds
the VM across the sites. :func:`reported` turns every failure into a tool error the
model can read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from ..config.loader import load_settings
from ..config.settings import Settings, validate_patterns
from ..errors import ConfigError, ZertoRewindError, ZvmConnectionError, ZvmTimeout

if TYPE_CHECKING:
    from ..core.guard import Guard
    from ..core.state import GuardStateLike

__all__ = [
    "DESTRUCTIVE",
    "READ",
    "TAG",
    "TEST_START",
    "CheckpointId",
    "Confirm",
    "Runtime",
    "ToolInput",
    "ToolName",
    "Vm",
    "VpgChoice",
    "load_checked",
    "read_deadline",
    "reported",
]

# Read-only tools give the ZVM this long; the guard has its own budget.
READ_DEADLINE_S = 60.0

# ---------------------------------------------------------------- argument types

Vm = Annotated[str, Field(description="the VM's name as Zerto shows it, e.g. 'jp-ubuntu'")]
CheckpointId = Annotated[
    str, Field(description="a CheckpointIdentifier from zerto_list_checkpoints or the guard")
]
VpgChoice = Annotated[
    str | None,
    Field(description="the VPG (name or id), needed only when the VM is in several VPGs"),
]
ToolName = Annotated[
    str, Field(description="the tool as the host names it, e.g. 'mcp__vsphere__power_off_vm'")
]
ToolInput = Annotated[
    dict[str, Any], Field(description="the arguments you intend to pass to that tool")
]
Confirm = Annotated[
    str,
    Field(
        description=(
            "must be exactly '<vm>@<checkpoint>': the vm argument, '@', and the checkpoint id "
            "(for commit/rollback: the checkpoint the operation was started from)"
        )
    ),
]

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
TAG = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
TEST_START = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


# ---------------------------------------------------------------- runtime


class Runtime:
    """Settings and guard (the estate's ZVMs), created on first use and shared by every tool."""

    def __init__(self, env: Mapping[str, str], settings: Settings | None) -> None:
        self.env = env
        self._settings = settings
        self._guard: Guard | None = None
        self._lock = threading.Lock()

    def settings(self) -> Settings:
        """The settings; a broken config is re-read on every call until it is fixed."""
        with self._lock:
            if self._settings is None:
                self._settings = load_checked(self.env)
            return self._settings

    def guard(self) -> Guard:
        """The guard (its estate and state directory are opened here, once)."""
        settings = self.settings()
        with self._lock:
            if self._guard is None:
                from ..core.guard import Guard

                guard = Guard(settings, rewind_tool="zerto_recovery_plan")  # this server's
                guard.estate()
                self._guard = guard
            return self._guard

    def state(self) -> GuardStateLike:
        return self.guard().state()

    def close(self) -> None:
        """Release the ZVM connection; the next tool call opens a new one."""
        with self._lock:
            guard, self._guard = self._guard, None
        if guard is not None:
            guard.close()


def load_checked(env: Mapping[str, str]) -> Settings:
    settings = load_settings(env)
    validate_patterns(settings)
    return settings


@contextmanager
def reported() -> Iterator[None]:
    """Turn every failure into a tool error that says what failed and what to do."""
    try:
        yield
    except ToolError:
        raise
    except ConfigError as exc:
        msg = f"fix the config: {exc}"
        raise ToolError(msg) from None
    except (ZvmConnectionError, ZvmTimeout) as exc:
        advice = "; check that the ZVM is up and reachable (`zerto-rewind doctor`), then retry"
        msg = f"{type(exc).__name__}: {exc}{advice}"
        raise ToolError(msg) from None
    except ZertoRewindError as exc:
        msg = f"{type(exc).__name__}: {exc}"
        raise ToolError(msg) from None
    except Exception as exc:
        msg = f"internal error: {type(exc).__name__}: {exc}"
        raise ToolError(msg) from exc


def read_deadline() -> float:
    return time.monotonic() + READ_DEADLINE_S
