"""Helpers for the MCP server's tests: configs for the simulator, counters, snapshots."""

from __future__ import annotations

import json
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from support.config import write_sim_config
from zerto_rewind.sim import SimServer
from zerto_rewind.testing import FAST_CADENCES

# FAST_CADENCES but aws every 4 s: see GUARD.
SIM_CADENCES = {**FAST_CADENCES, "aws": 4.0}
POWER_OFF = "mcp__vsphere__power_off_vm"
LIST_VMS = "mcp__vsphere__list_vms"
# The guard budget is 3 s. CMH-AWS-1's journal really writes every 4 s, but the
# guard is told 8 s (a config override), so its expected landing is always past
# the budget: the aws case is deterministically *pending*, and the tag still
# lands within ~4 s, well before the guard's retry time.
GUARD = {
    "timeout_s": 3,
    "site_cadence_s": {"vcenter": 1.0, "hyperv": 1.0, "azure": 2.0, "aws": 4.0},
    "cadence_s": {"CMH-AWS-1": 8.0},
    "landing_allowance_s": 0.5,
}


def write_mcp_config(
    sim: SimServer,
    directory: Path,
    *,
    allow_live: bool = False,
    password_env: str | None = None,
) -> Path:
    """The MCP tests' config: a vsphere-like catalog, GUARD, the log in ``directory``."""
    return write_sim_config(
        sim,
        directory,
        secret_env=password_env,
        read_only_tools=[LIST_VMS],
        tools={POWER_OFF: {"vm_arg": "name"}},
        guard=GUARD,
        recovery={"allow_live": allow_live},
        log=str(directory / "decisions.log"),
    )


def sim_get(sim: SimServer, path: str) -> Any:
    """GET a simulator path (control plane, or the API with a fresh token)."""
    assert sim.ca_bundle is not None
    verify = ssl.create_default_context(cafile=sim.ca_bundle)
    with httpx.Client(base_url=sim.url, verify=verify, timeout=5.0) as client:
        if path.startswith("/_sim/"):
            return client.get(path).json()
        form = {
            "grant_type": "password",
            "client_id": "zerto-client",
            "username": sim.credentials["username"],
            "password": sim.credentials["password"],
        }
        token = client.post("/auth/realms/zerto/protocol/openid-connect/token", data=form)
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        return client.get(path, headers=headers).json()


def sim_post(sim: SimServer, path: str, body: Any) -> Any:
    """POST to the simulator's control plane."""
    assert sim.ca_bundle is not None
    verify = ssl.create_default_context(cafile=sim.ca_bundle)
    with httpx.Client(base_url=sim.url, verify=verify, timeout=5.0) as client:
        return client.post(path, json=body).json()


def tag_requests(sim: SimServer) -> dict[str, int]:
    """Tag requests the simulator received, per VPG name."""
    return dict(sim_get(sim, "/_sim/stats")["tag_requests"])


def vpg_wire(sim: SimServer, name: str) -> dict[str, Any]:
    """A VPG as the simulated ZVM serves it."""
    rows = sim_get(sim, f"/v1/vpgs?name={name}")
    assert len(rows) == 1, rows
    return dict(rows[0])


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its content."""
    if not directory.exists():
        return {}
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def log_records(path: Path) -> list[dict[str, Any]]:
    """The decision log's records."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def text(result: Any) -> str:
    """The text of a tool result's first content block."""
    return str(result.content[0].text)


@asynccontextmanager
async def serve(config: Path, env: dict[str, str], stderr: Path) -> AsyncIterator[Client]:
    """`python -m zerto_rewind serve --config F` over stdio, with the real MCP client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "zerto_rewind", "serve", "--config", str(config)],
        env=env,
    )
    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must succeed; its structured content."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return dict(result.structured_content)


async def fails(client: Client, tool: str, **arguments: Any) -> str:
    """Call a tool that must fail; the error text the model reads."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return text(result)
