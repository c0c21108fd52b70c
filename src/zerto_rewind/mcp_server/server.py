"""``zerto-rewind serve``: the MCP server that lets a cooperative model plan, check and recover.

The hook enforces; these tools let the model ask first. Every tool is a thin
adapter over :mod:`~zerto_rewind.recovery.preview`, :mod:`~zerto_rewind.recovery.protection`,
:mod:`~zerto_rewind.recovery.plan`, :mod:`~zerto_rewind.recovery.failover` (the failover
test) and :mod:`~zerto_rewind.recovery.live` (its tools are in
:mod:`~zerto_rewind.mcp_server.live_tools`); argument types, annotations and the shared
runtime are in :mod:`~zerto_rewind.mcp_server.runtime`. Errors come back as tool
errors the model can read (``is_error``), never as a crashed server.

Start-up stays quick: the config is read (no network), the guard, the ZVM
client and httpx are created on the first tool call. With a missing or broken
config the server still starts and lists its tools; each tool then answers
"fix the config: ...". Live failover and journal VM restore are registered only
when the config says ``"recovery": {"allow_live": true}``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from ..config.settings import Settings
from ..core.decision import Row, ToolCall
from ..core.decisions_log import register_anchor
from ..core.log_anchor import policy_for
from ..errors import ConfigError
from ..recovery.failover import OperationResult, start_failover_test, stop_failover_test
from ..recovery.plan import RecoveryPlan, recovery_plan
from ..recovery.preview import GuardAnswer, ToolCheck, confirm_call, preview_call
from ..recovery.protection import (
    CheckpointListing,
    ProtectionStatus,
    checkpoint_listing,
    protection_status,
)
from ..recovery.rewind_build import RewindPlan, build_plan
from ..recovery.rewind_plan import Scope
from .live_tools import register_live_tools
from .runtime import (
    DESTRUCTIVE,
    READ,
    TAG,
    TEST_START,
    CheckpointId,
    Runtime,
    ToolInput,
    ToolName,
    Vm,
    VpgChoice,
    load_checked,
    read_deadline,
    reported,
)

__all__ = ["build_server", "main"]

SERVER_NAME = "zerto-rewind"


INSTRUCTIONS = """\
zerto-rewind keeps a Zerto journal checkpoint in front of every change to a VM.
Before changing a VM: zerto_check_tool(tool_name, tool_input) says what the guard
will decide; zerto_guard_before_mutate(tool_name, tool_input) makes and confirms
the checkpoint (or says when to retry). To go back: zerto_list_checkpoints, then
zerto_recovery_plan(vm, checkpoint); zerto_start_failover_test checks a checkpoint
without touching production. With several Zerto sites, each answer names the site
whose ZVM it used (zvm_site), and a site that did not answer is named."""


# ---------------------------------------------------------------- tools


def _register_guard_tools(server: MCPServer[Any], rt: Runtime) -> None:
    @server.tool(annotations=READ)
    def zerto_check_tool(tool_name: ToolName, tool_input: ToolInput) -> ToolCheck:
        """Predict what the zerto-rewind guard will decide for a tool call, with no side effects.

        Returns the decision row (read_only, confirmed, pending, failed, vm_unknown, no_vm,
        unlisted), the VMs and VPGs involved, their protected-site types, whether an existing
        checkpoint would be reused, the expected tag wait and whether it exceeds the guard's
        budget. Requests no tag and changes nothing. Use it before planning a change.
        """
        with reported():
            # Bounded by the guard's own budget (guard.timeout_s), as the decision it predicts.
            return preview_call(rt.settings(), rt.guard(), rt.state(), tool_name, tool_input)

    @server.tool(annotations=TAG)
    def zerto_guard_before_mutate(tool_name: ToolName, tool_input: ToolInput) -> GuardAnswer:
        """Make and confirm the Zerto checkpoint for a mutating call you are about to make.

        Runs the guard exactly as the hook will (tags the VM's VPGs, waits as long as their
        journal cadence needs, within the guard's budget) and returns: confirmed with the
        checkpoint (VM, VPG, checkpoint id, tag, timestamp, how to rewind); failed with the
        reason and what to do; or pending with retry_after: call this tool again after that
        time. Your next mutating call on that VPG reuses this checkpoint: the hook does not
        tag again. Calling it again changes nothing once confirmed.
        """
        with reported():
            settings = rt.settings()
            call = ToolCall(tool_name, tool_input, session_id="mcp", origin="mcp")
            register_anchor(policy_for(settings))
            answer, decision = confirm_call(rt.guard(), call, log_path=settings.log_path)
            if decision.row in (Row.ERROR, Row.CONFIG_ERROR):
                raise ToolError(decision.reason)
            return answer


def _register_status_tools(server: MCPServer[Any], rt: Runtime) -> None:
    @server.tool(annotations=READ)
    def zerto_protection_status(vm: Vm) -> ProtectionStatus:
        """Show how Zerto protects a VM: every VPG, protected/recovery site and site type,
        status and substatus, RPO, journal cadence, latest (tagged) checkpoint, whether a tag
        can be made now, and the guard's last tag on each VPG."""
        with reported():
            return protection_status(
                rt.guard(), rt.settings(), vm, state=rt.state(), deadline=read_deadline()
            )

    @server.tool(annotations=READ)
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
        with reported():
            return checkpoint_listing(
                rt.guard(),
                vm,
                since=since,
                tagged_only=tagged_only,
                vpg=vpg,
                limit=limit,
                deadline=read_deadline(),
            )


def _register_recovery_tools(server: MCPServer[Any], rt: Runtime) -> None:
    @server.tool(annotations=READ)
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
        with reported():
            return recovery_plan(rt.guard(), rt.settings(), vm, checkpoint, vpg=vpg)

    @server.tool(annotations=READ)
    def zerto_rewind_plan(
        session: Annotated[str, Field(description="the agent session whose changes to undo")],
    ) -> RewindPlan:
        """Propose, read-only, how to put back the VMs a session changed: per VM the checkpoint
        taken before the session's first change to it, the Zerto operation, what else it would
        undo, and what cannot be rewound. Nothing runs and nothing is saved: a rewind is run
        by a person (an approver) with `zerto-rewind rewind --session ID`, never by a tool."""
        with reported():
            return build_plan(rt.guard(), rt.settings(), Scope(session_id=session))

    @server.tool(annotations=TEST_START)
    def zerto_start_failover_test(
        vm: Vm, checkpoint: CheckpointId, vpg: VpgChoice = None
    ) -> OperationResult:
        """Start a Zerto failover test of a VM from a checkpoint: the non-disruptive way to check
        that the checkpoint is good. Creates test VMs at the recovery site; production keeps
        running. Waits (bounded) for the ZVM task; returns task id and the VPG's state. Stop it
        with zerto_stop_failover_test when done."""
        with reported():
            return start_failover_test(rt.guard(), vm, checkpoint, vpg=vpg)

    @server.tool(annotations=DESTRUCTIVE)
    def zerto_stop_failover_test(
        vm: Vm,
        success: Annotated[bool, Field(description="whether the checkpoint proved good")],
        summary: Annotated[str, Field(description="what was checked, recorded in Zerto")],
        vpg: VpgChoice = None,
    ) -> OperationResult:
        """Stop the running failover test on the VM's VPG and record its result; this deletes
        the test VMs (and anything written to them). Returns task id and the VPG's state."""
        with reported():
            return stop_failover_test(rt.guard(), vm, success, summary, vpg=vpg)


# ---------------------------------------------------------------- assembly and CLI


def build_server(
    env: Mapping[str, str] | None = None, *, config: str | None = None
) -> MCPServer[dict[str, Any]]:
    """The MCP server; ``config`` overrides ``ZERTO_REWIND_CONFIG``. Never fails on the config."""
    merged = dict(os.environ if env is None else env)
    if config:
        merged["ZERTO_REWIND_CONFIG"] = config
    try:
        settings: Settings | None = load_checked(merged)
        instructions = INSTRUCTIONS
    except ConfigError as exc:
        settings = None
        instructions = f"{INSTRUCTIONS}\nNOT READY — fix the config: {exc}"
    runtime = Runtime(merged, settings)

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
    _register_status_tools(server, runtime)
    _register_recovery_tools(server, runtime)
    if settings is not None and settings.allow_live_recovery:
        register_live_tools(server, runtime)
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
