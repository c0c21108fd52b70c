"""``zerto-rewind serve``: the MCP server that lets a cooperative model plan, check and recover.

The hook enforces; these tools let the model ask first. Every tool is a thin
adapter over :mod:`~zerto_rewind.preview`, :mod:`~zerto_rewind.protection`,
:mod:`~zerto_rewind.recovery_plan`, :mod:`~zerto_rewind.recovery` (the failover
test) and :mod:`~zerto_rewind.recovery_live`; errors come back as tool errors
the model can read (``is_error``), never as a crashed server.

Start-up stays quick: the config is read (no network), the guard, the ZVM
client and httpx are created on the first tool call. With a missing or broken
config the server still starts and lists its tools; each tool then answers
"fix the config: ...". Live failover and journal VM restore are registered only
when the config says ``"recovery": {"allow_live": true}``.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from .config import Settings, load_settings, validate_patterns
from .decision import Row, ToolCall
from .errors import ConfigError, ZertoRewindError, ZvmConnectionError, ZvmTimeout
from .preview import GuardAnswer, ToolCheck, confirm_call, preview_call
from .protection import CheckpointListing, ProtectionStatus, checkpoint_listing, protection_status
from .recovery import OperationResult, start_failover_test, stop_failover_test
from .recovery_live import (
    CommitPolicy,
    ShutdownPolicy,
    failover,
    finish_failover,
    finish_restore,
    restore_vm,
)
from .recovery_plan import RecoveryPlan, recovery_plan

if TYPE_CHECKING:
    from .guard import Guard
    from .state import GuardState
    from .zvm.client import ZvmClient

__all__ = ["build_server", "main"]

SERVER_NAME = "zerto-rewind"
# Read-only tools give the ZVM this long; the guard has its own budget.
_READ_DEADLINE_S = 60.0

INSTRUCTIONS = """\
zerto-rewind keeps a Zerto journal checkpoint in front of every change to a VM.
Before changing a VM: zerto_check_tool(tool_name, tool_input) says what the guard
will decide; zerto_guard_before_mutate(tool_name, tool_input) makes and confirms
the checkpoint (or says when to retry). To go back: zerto_list_checkpoints, then
zerto_recovery_plan(vm, checkpoint); zerto_start_failover_test checks a checkpoint
without touching production."""

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

_READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_TAG = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
_TEST_START = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
_DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


# ---------------------------------------------------------------- runtime


class _Runtime:
    """Settings, guard and ZVM client, created on first use and shared by every tool."""

    def __init__(self, env: Mapping[str, str], settings: Settings | None) -> None:
        self.env = env
        self._settings = settings
        self._guard: Guard | None = None
        self._lock = threading.Lock()

    def settings(self) -> Settings:
        """The settings; a broken config is re-read on every call until it is fixed."""
        with self._lock:
            if self._settings is None:
                self._settings = _load(self.env)
            return self._settings

    def guard(self) -> Guard:
        """The guard (its ZVM client and state directory are opened here, once)."""
        settings = self.settings()
        with self._lock:
            if self._guard is None:
                from .guard import Guard

                guard = Guard(settings)
                guard.client()
                self._guard = guard
            return self._guard

    def client(self) -> ZvmClient:
        return self.guard().client()

    def state(self) -> GuardState:
        return self.guard().state()

    def close(self) -> None:
        """Release the ZVM connection; the next tool call opens a new one."""
        with self._lock:
            guard, self._guard = self._guard, None
        if guard is not None:
            guard.close()


def _load(env: Mapping[str, str]) -> Settings:
    settings = load_settings(env)
    validate_patterns(settings)
    return settings


@contextmanager
def _reported() -> Iterator[None]:
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


def _deadline() -> float:
    return time.monotonic() + _READ_DEADLINE_S


# ---------------------------------------------------------------- tools


def _register_guard_tools(server: MCPServer[Any], rt: _Runtime) -> None:
    @server.tool(annotations=_READ)
    def zerto_check_tool(tool_name: ToolName, tool_input: ToolInput) -> ToolCheck:
        """Predict what the zerto-rewind guard will decide for a tool call, with no side effects.

        Returns the decision row (read_only, confirmed, pending, failed, vm_unknown, no_vm,
        unlisted), the VMs and VPGs involved, their protected-site types, whether an existing
        checkpoint would be reused, the expected tag wait and whether it exceeds the guard's
        budget. Requests no tag and changes nothing. Use it before planning a change.
        """
        with _reported():
            return preview_call(
                rt.settings(), rt.client(), rt.state(), tool_name, tool_input, deadline=_deadline()
            )

    @server.tool(annotations=_TAG)
    def zerto_guard_before_mutate(tool_name: ToolName, tool_input: ToolInput) -> GuardAnswer:
        """Make and confirm the Zerto checkpoint for a mutating call you are about to make.

        Runs the guard exactly as the hook will (tags the VM's VPGs, waits as long as their
        journal cadence needs, within the guard's budget) and returns: confirmed with the
        checkpoint (VM, VPG, checkpoint id, tag, timestamp, how to rewind); failed with the
        reason and what to do; or pending with retry_after: call this tool again after that
        time. Your next mutating call on that VPG reuses this checkpoint: the hook does not
        tag again. Calling it again changes nothing once confirmed.
        """
        with _reported():
            settings = rt.settings()
            call = ToolCall(tool_name, tool_input, session_id="mcp", origin="mcp")
            answer, decision = confirm_call(rt.guard(), call, log_path=settings.log_path)
            if decision.row in (Row.ERROR, Row.CONFIG_ERROR):
                raise ToolError(decision.reason)
            return answer

    @server.tool(annotations=_READ)
    def zerto_protection_status(vm: Vm) -> ProtectionStatus:
        """Show how Zerto protects a VM: every VPG, protected/recovery site and site type,
        status and substatus, RPO, journal cadence, latest (tagged) checkpoint, whether a tag
        can be made now, and the guard's last tag on each VPG."""
        with _reported():
            return protection_status(
                rt.client(), rt.settings(), vm, state=rt.state(), deadline=_deadline()
            )

    @server.tool(annotations=_READ)
    def zerto_list_checkpoints(
        vm: Vm,
        since: Annotated[
            str | None,
            Field(description="ISO-8601 time, or back from now: '90s', '30m', '2h', '1d' (1h)"),
        ] = None,
        tagged_only: Annotated[bool, Field(description="only tagged checkpoints")] = False,
        vpg: VpgChoice = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="newest N per VPG")] = 50,
    ) -> CheckpointListing:
        """List a VM's journal checkpoints per VPG, newest first: id, timestamp, tag.

        Tags made by zerto-rewind start with its tag prefix and name the tool and VM.
        """
        with _reported():
            return checkpoint_listing(
                rt.client(),
                vm,
                since=since,
                tagged_only=tagged_only,
                vpg=vpg,
                limit=limit,
                deadline=_deadline(),
            )


def _register_recovery_tools(server: MCPServer[Any], rt: _Runtime) -> None:
    @server.tool(annotations=_READ)
    def zerto_recovery_plan(
        vm: Vm, checkpoint: CheckpointId, vpg: VpgChoice = None
    ) -> RecoveryPlan:
        """Explain, read-only, which Zerto operations would bring a VM back to a checkpoint.

        Zerto never rolls the production VM back in place. Options: failover test
        (non-disruptive: test VMs at the recovery site), live failover + commit with or without
        reverse protection (production downtime; VMs come up at the recovery site from the
        checkpoint), journal VM restore (one VM recreated from the checkpoint). For each: what
        it affects, whether it is available, and the exact tool calls (with the confirm value)
        and CLI commands. Fails, naming the nearest tagged checkpoints, if the checkpoint is not
        in the VM's VPG journal.
        """
        with _reported():
            return recovery_plan(rt.client(), rt.settings(), vm, checkpoint, vpg=vpg)

    @server.tool(annotations=_TEST_START)
    def zerto_start_failover_test(
        vm: Vm, checkpoint: CheckpointId, vpg: VpgChoice = None
    ) -> OperationResult:
        """Start a Zerto failover test of a VM from a checkpoint: the non-disruptive way to check
        that the checkpoint is good. Creates test VMs at the recovery site; production keeps
        running. Waits (bounded) for the ZVM task; returns task id and the VPG's state. Stop it
        with zerto_stop_failover_test when done."""
        with _reported():
            return start_failover_test(rt.client(), vm, checkpoint, vpg=vpg)

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_stop_failover_test(
        vm: Vm,
        success: Annotated[bool, Field(description="whether the checkpoint proved good")],
        summary: Annotated[str, Field(description="what was checked, recorded in Zerto")],
        vpg: VpgChoice = None,
    ) -> OperationResult:
        """Stop the running failover test on the VM's VPG and record its result; this deletes
        the test VMs (and anything written to them). Returns task id and the VPG's state."""
        with _reported():
            return stop_failover_test(rt.client(), vm, success, summary, vpg=vpg)


def _register_live_tools(server: MCPServer[Any], rt: _Runtime) -> None:
    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_failover(
        vm: Vm,
        checkpoint: CheckpointId,
        confirm: Confirm,
        commit_policy: Annotated[
            CommitPolicy,
            Field(description="after the wait: none (wait for commit), rollback or commit"),
        ] = "none",
        reverse_protection: Annotated[
            bool, Field(description="replicate back to the original site on commit")
        ] = False,
        shutdown_policy: Annotated[
            ShutdownPolicy, Field(description="what happens to the production VMs")
        ] = "shutdown",
        vpg: VpgChoice = None,
    ) -> OperationResult:
        """LIVE failover of the VM's whole VPG to a checkpoint: production downtime; the VMs come
        up at the recovery site from the checkpoint and wait before commit. confirm must be
        exactly '<vm>@<checkpoint>'. Then zerto_failover_commit or zerto_failover_rollback."""
        with _reported():
            return failover(
                rt.client(),
                rt.settings(),
                vm,
                checkpoint,
                confirm,
                commit_policy=commit_policy,
                reverse_protection=reverse_protection,
                shutdown_policy=shutdown_policy,
                vpg=vpg,
            )

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_failover_commit(
        vm: Vm,
        confirm: Confirm,
        reverse_protection: Annotated[
            bool, Field(description="protect the recovered VMs back to the original site")
        ],
        vpg: VpgChoice = None,
    ) -> OperationResult:
        """Commit the live failover waiting on the VM's VPG: the recovered VMs stay. confirm must
        be exactly '<vm>@<checkpoint the failover started from>'."""
        with _reported():
            settings = rt.settings()
            return finish_failover(
                rt.client(), settings, vm, confirm, commit=True,
                reverse_protection=reverse_protection, vpg=vpg,
            )  # fmt: skip

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_failover_rollback(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Roll back the live failover waiting on the VM's VPG: the recovered VMs are removed.
        confirm must be exactly '<vm>@<checkpoint the failover started from>'."""
        with _reported():
            return finish_failover(rt.client(), rt.settings(), vm, confirm, commit=False, vpg=vpg)

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_restore_vm(
        vm: Vm,
        checkpoint: CheckpointId,
        confirm: Confirm,
        restored_vm_name: Annotated[
            str | None, Field(description="name of the restored VM (ZVM default if omitted)")
        ] = None,
        vpg: VpgChoice = None,
    ) -> OperationResult:
        """Journal VM restore: recreate this one VM from a checkpoint. It waits for commit; the VPG
        takes no new checkpoints meanwhile. confirm must be exactly '<vm>@<checkpoint>'. Then
        zerto_restore_commit or zerto_restore_rollback."""
        with _reported():
            return restore_vm(
                rt.client(),
                rt.settings(),
                vm,
                checkpoint,
                confirm,
                restored_vm_name=restored_vm_name,
                vpg=vpg,
            )

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_restore_commit(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Commit the journal VM restore of a VM: the restored VM stays. confirm must be exactly
        '<vm>@<checkpoint the restore started from>'."""
        with _reported():
            return finish_restore(rt.client(), rt.settings(), vm, confirm, commit=True, vpg=vpg)

    @server.tool(annotations=_DESTRUCTIVE)
    def zerto_restore_rollback(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Roll back the journal VM restore of a VM: the restored VM is discarded. confirm must
        be exactly '<vm>@<checkpoint the restore started from>'."""
        with _reported():
            return finish_restore(rt.client(), rt.settings(), vm, confirm, commit=False, vpg=vpg)


# ---------------------------------------------------------------- assembly and CLI


def build_server(
    env: Mapping[str, str] | None = None, *, config: str | None = None
) -> MCPServer[dict[str, Any]]:
    """The MCP server; ``config`` overrides ``ZERTO_REWIND_CONFIG``. Never fails on the config."""
    merged = dict(os.environ if env is None else env)
    if config:
        merged["ZERTO_REWIND_CONFIG"] = config
    try:
        settings: Settings | None = _load(merged)
        instructions = INSTRUCTIONS
    except ConfigError as exc:
        settings = None
        instructions = f"{INSTRUCTIONS}\nNOT READY — fix the config: {exc}"
    runtime = _Runtime(merged, settings)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        try:
            yield {}
        finally:
            runtime.close()

    server: MCPServer[dict[str, Any]] = MCPServer(
        SERVER_NAME, instructions=instructions, log_level="WARNING", lifespan=lifespan
    )
    _register_guard_tools(server, runtime)
    _register_recovery_tools(server, runtime)
    if settings is not None and settings.allow_live_recovery:
        _register_live_tools(server, runtime)
    return server


def main(argv: list[str] | None = None) -> int:
    """``zerto-rewind serve [--config PATH] [--transport stdio|streamable-http]``."""
    parser = argparse.ArgumentParser(
        prog="zerto-rewind serve", description="Serve zerto-rewind's MCP tools."
    )
    parser.add_argument("--config", help="config file (overrides ZERTO_REWIND_CONFIG)")
    parser.add_argument(
        "--transport", choices=("stdio", "streamable-http"), default="stdio", help="default stdio"
    )
    parser.add_argument("--host", default="127.0.0.1", help="streamable-http: address to bind")
    parser.add_argument("--port", type=int, default=8000, help="streamable-http: port (8000)")
    args = parser.parse_args(argv)
    server = build_server(config=args.config)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)
    return 0
