"""Live failover and journal VM restore as MCP tools (only with ``recovery.allow_live``).

Each call must repeat the VM name and checkpoint id in ``confirm``; every tool
is marked destructive. The library behind them is :mod:`~zerto_rewind.recovery.live`.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from ..recovery.failover import OperationResult
from ..recovery.live import (
    CommitPolicy,
    ShutdownPolicy,
    failover,
    finish_failover,
    finish_restore,
    restore_vm,
)
from .runtime import DESTRUCTIVE, CheckpointId, Confirm, Runtime, Vm, VpgChoice, reported

__all__ = ["register_live_tools"]


def register_live_tools(server: MCPServer[Any], rt: Runtime) -> None:
    """Register the live failover tools, then the journal VM restore tools."""
    _register_failover_tools(server, rt)
    _register_restore_tools(server, rt)


def _register_failover_tools(server: MCPServer[Any], rt: Runtime) -> None:
    @server.tool(annotations=DESTRUCTIVE)
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
        with reported():
            return failover(
                rt.guard(),
                rt.settings(),
                vm,
                checkpoint,
                confirm,
                commit_policy=commit_policy,
                reverse_protection=reverse_protection,
                shutdown_policy=shutdown_policy,
                vpg=vpg,
            )

    @server.tool(annotations=DESTRUCTIVE)
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
        with reported():
            settings = rt.settings()
            return finish_failover(
                rt.guard(), settings, vm, confirm, commit=True,
                reverse_protection=reverse_protection, vpg=vpg,
            )  # fmt: skip

    @server.tool(annotations=DESTRUCTIVE)
    def zerto_failover_rollback(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Roll back the live failover waiting on the VM's VPG: the recovered VMs are removed.
        confirm must be exactly '<vm>@<checkpoint the failover started from>'."""
        with reported():
            return finish_failover(rt.guard(), rt.settings(), vm, confirm, commit=False, vpg=vpg)


def _register_restore_tools(server: MCPServer[Any], rt: Runtime) -> None:
    @server.tool(annotations=DESTRUCTIVE)
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
        with reported():
            return restore_vm(
                rt.guard(),
                rt.settings(),
                vm,
                checkpoint,
                confirm,
                restored_vm_name=restored_vm_name,
                vpg=vpg,
            )

    @server.tool(annotations=DESTRUCTIVE)
    def zerto_restore_commit(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Commit the journal VM restore of a VM: the restored VM stays. confirm must be exactly
        '<vm>@<checkpoint the restore started from>'."""
        with reported():
            return finish_restore(rt.guard(), rt.settings(), vm, confirm, commit=True, vpg=vpg)

    @server.tool(annotations=DESTRUCTIVE)
    def zerto_restore_rollback(vm: Vm, confirm: Confirm, vpg: VpgChoice = None) -> OperationResult:
        """Roll back the journal VM restore of a VM: the restored VM is discarded. confirm must
        be exactly '<vm>@<checkpoint the restore started from>'."""
        with reported():
            return finish_restore(rt.guard(), rt.settings(), vm, confirm, commit=False, vpg=vpg)
