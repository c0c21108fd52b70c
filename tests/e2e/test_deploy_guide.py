"""docs/deploy.md, followed in a fresh directory standing in for ``/``.

The guide's own blocks are run, not copies of them: every fenced block after a
``<!-- deploy-test: KIND … -->`` marker, in the page's order, with the substitutions the
page lists under "What the test substitutes" (paths under a fresh root, fresh user names,
free loopback ports, the simulators' addresses and logins). So a command, an option or a
config key the product no longer takes fails here. The runner is ``e2e.deploy_guide``.

- ``run`` (``as=USER``, ``stdin=SITE``): ``bash -e -c`` as root, or as that user;
- ``file PATH mode=OCTAL``: the block is written to PATH;
- ``mcvsphere``: the venv line runs; the ``pip install`` line must pin what
  ``scripts/realvm-setup`` installs, and is replaced by that prepared mcvsphere (nothing is
  fetched).

Real parts: ``useradd`` users, govmomi's vCenter simulator with the real mcvsphere started
by the gateway as its own user, the ZVM simulator's two sites over TLS, the gateway started
with the drop-in's ``ExecStart`` (the unit ``install mcp-host`` wrote, checked to be its
prefix), the Codex and Claude Code files ``install mcp-host`` wrote (read by the pinned CLIs
as the agent's user; the agent's calls use their URLs and tokens), ``doctor`` as the guide
runs it, and the approver's CLI as the approver's user on the approvals socket.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from e2e.deploy_guide import (
    GUIDE,
    GUIDE_PATHS,
    PAGE_HASH,
    PAGE_PASSWORD,
    REQUEST_ID,
    TWO_SITES,
    USERS,
    ZERTO_REWIND,
    Block,
    Deployment,
    guide_blocks,
)
from e2e.gateway_e2e import CONFIRMED_VPG, SIM_CADENCES, VM
from e2e.harness import claude_path, write_json
from e2e.hosts_e2e import HOSTS, NODE_BIN, host_path
from support.ports import free_port
from support.realvm import (
    power_states,
    setup_problems,
    start_vcsim,
)
from zerto_rewind.testing import Sandbox, fast_sim_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    problems = setup_problems()
    assert not problems, f"the real VM side is not set up: {'; '.join(problems)}"
    if os.geteuid() != 0:
        pytest.skip("the guide creates users and runs the gateway as root: run as root (CI does)")
    # The pinned hosts the guide's `as=alice` block runs: a loud error if missing.
    assert claude_path().parent == NODE_BIN
    assert host_path(HOSTS["codex"]).parent == NODE_BIN
    root = Path(tempfile.mkdtemp(prefix="zr-deploy-"))
    root.chmod(0o755)
    users = {name: prefix + secrets.token_hex(3) for name, prefix in USERS.items()}
    try:
        (root / "work").mkdir()
        # What every system has already, and the guide does not make.
        for base in ("etc/systemd/system", "home", "opt", "run", "var/lib", "var/log"):
            (root / base).mkdir(mode=0o755, parents=True)
        estate = write_json(root / "estate.json", TWO_SITES)
        sim = fast_sim_config(
            cadences=dict(SIM_CADENCES), estate_file=estate, seed=7, client_id="zerto-rewind"
        )
        with (
            start_vcsim(root / "vcsim") as vcsim,
            Sandbox(str(root / "zerto"), sim_config=sim) as box,
        ):
            for site, zvm in box.sites.items():
                shutil.copy(zvm["ca_bundle"], root / "work" / f"zvm-{site}-ca.pem")
            ports = {"gateway": free_port(), "page": free_port()}
            deployed = Deployment(root, vcsim.vcenter, box, users, ports)
            try:
                yield deployed
            finally:
                deployed.stop_gateway()
    finally:
        for name in users.values():
            subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _entries(deployment: Deployment) -> dict[str, tuple[str, str]]:
    """Each host's gateway URL and Authorization header, as install mcp-host left them."""
    codex = tomllib.loads(deployment.path("/home/alice/.codex/config.toml").read_text())
    claude = json.loads(deployment.path("/home/alice/.claude.json").read_text())
    c = codex["mcp_servers"]["vsphere"]
    k = claude["mcpServers"]["vsphere"]
    assert "env" not in c, "Codex's file kept the vCenter credentials"
    assert "env" not in k, "Claude Code's file kept the vCenter credentials"
    return {
        "codex": (c["url"], c["http_headers"]["Authorization"]),
        "claude-code": (k["url"], k["headers"]["Authorization"]),
    }


async def _call(url: str, auth: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    timeout = httpx2.Timeout(30.0, read=180.0)
    async with (
        httpx2.AsyncClient(headers={"Authorization": auth}, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), cache=None) as client,
    ):
        return await client.call_tool(tool, arguments, read_timeout_seconds=170)


def call(url: str, auth: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    return anyio.run(_call, url, auth, tool, arguments)


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def test_the_guide_deploys_a_working_gateway(deployment: Deployment) -> None:
    blocks = guide_blocks(GUIDE.read_text(encoding="utf-8"))
    kinds = [b.kind for b in blocks]
    assert kinds.count("mcvsphere") == 1, kinds
    assert {"file", "run"} <= set(kinds), kinds
    approver_blocks = [b for b in blocks if b.options.get("as") == "olivia"]
    assert len(approver_blocks) == 1, "the guide's approver step is one block run as olivia"
    started = False
    hosts_shown = ""
    for block in blocks:
        if block in approver_blocks:
            continue  # run below, once a call waits for it
        if block.kind == "mcvsphere":
            deployment.install_mcvsphere(block)
        elif block.kind == "file":
            written = deployment.write(block)
            if written.name == "gateway.json":
                _paste_page_hash(deployment, written)
            if written.suffix == ".conf" and ".service.d" in str(written.parent):
                deployment.start_gateway(written)
                started = True
        elif block.kind == "run":
            assert started or "doctor" not in block.body, "doctor comes after the service starts"
            done = deployment.run(block)
            if block.options.get("as") == "alice":
                hosts_shown += done.stdout
            if "doctor" in block.body:
                _doctor_passed(deployment, done.stdout + done.stderr)
        else:
            pytest.fail(f"unknown marker kind {block.kind!r} in {GUIDE.name}")
    assert started, "no drop-in for the gateway's unit in the guide"

    entries = _entries(deployment)
    assert hosts_shown, "no block in the guide runs the hosts as alice"
    _the_hosts_took_their_files(deployment, entries, hosts_shown)
    _read_only_and_confirmed(deployment, entries)
    _approved_by_the_approver(deployment, entries, approver_blocks[0])
    _the_page_lets_the_approver_in(deployment)


def _paste_page_hash(deployment: Deployment, config: Path) -> None:
    """The guide's `approvals hash-password` step, its output pasted where the page's says."""
    done = subprocess.run(
        [ZERTO_REWIND, "approvals", "hash-password"], input=PAGE_PASSWORD + "\n",
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    digest = done.stdout.strip().splitlines()[-1]
    assert digest.startswith("scrypt$")
    text = config.read_text()
    assert PAGE_HASH in text
    config.write_text(text.replace(PAGE_HASH, digest))


def _doctor_passed(deployment: Deployment, output: str) -> None:
    port = deployment.ports["gateway"]
    lines = output.splitlines()
    gateway = [line for line in lines if f"gateway http://127.0.0.1:{port}" in line]
    assert len(gateway) == 2, output  # one line per host entry: Codex and Claude Code
    assert all("the gateway is ready" in line for line in gateway), output
    start = [line for line in lines if "upstream vsphere: start" in line]
    assert len(start) == 1, output
    assert "answered initialize" in start[0], output
    assert not [line for line in lines if line.lstrip().startswith("FAIL")], output
    for site in ("hq", "dr"):  # each site's ZVM answered, with its own secret and CA
        assert any(f"PASS  zvm: {site}: " in line for line in lines), output
    assert any("PASS  pairing: hq: paired with dr" in line for line in lines), output


def _the_hosts_took_their_files(
    deployment: Deployment, entries: dict[str, tuple[str, str]], output: str
) -> None:
    """alice's own files (hers, 0600), as the guide's block showed them through the pinned
    Codex and Claude Code run as alice: the gateway's URL; Claude Code connected with it."""
    home = deployment.path("/home/alice")
    for name in (".codex/config.toml", ".claude.json"):
        info = (home / name).stat()
        assert pwd.getpwuid(info.st_uid).pw_name == deployment.users["alice"], name
        assert info.st_mode & 0o777 == 0o600, name
    assert f"url: {entries['codex'][0]}" in output, output
    assert f"URL: {entries['claude-code'][0]}" in output, output
    assert "Connected" in output, output
    assert entries["codex"][1].split()[1] not in output, "codex printed the token"


def _read_only_and_confirmed(deployment: Deployment, entries: dict[str, tuple[str, str]]) -> None:
    url, auth = entries["codex"]
    listed = call(url, auth, "list_vms", {})
    assert not listed.is_error, text_of(listed)
    assert VM.confirmed in text_of(listed) or VM.confirmed in json.dumps(listed.structured_content)
    url, auth = entries["claude-code"]
    off = call(url, auth, "power_off", {"name": VM.confirmed})
    assert not off.is_error, text_of(off)
    assert "zerto-rewind: a Zerto checkpoint protects this" in text_of(off)
    assert power_states(deployment.vcenter)[VM.confirmed] == "poweredOff"
    confirmed = [r for r in deployment.log() if r.get("row") == "confirmed"]
    assert len(confirmed) == 1, json.dumps(deployment.log())
    assert confirmed[0]["vms"] == [VM.confirmed]
    assert confirmed[0]["checkpoint_ids"]
    assert confirmed[0]["client"] == f"{deployment.users['alice']}-claude"
    assert deployment.box.tag_requests(CONFIRMED_VPG, site="hq") == 1
    assert deployment.box.tag_requests(CONFIRMED_VPG, site="dr") == 0


def _approved_by_the_approver(
    deployment: Deployment, entries: dict[str, tuple[str, str]], approver: Block
) -> None:
    url, auth = entries["codex"]
    outcome: dict[str, Any] = {}

    def agent() -> None:
        try:
            outcome["result"] = call(url, auth, "power_off", {"name": VM.unknown})
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    waiting = threading.Thread(target=agent, daemon=True)
    waiting.start()
    deadline = time.monotonic() + 60
    while not (ids := _requested(deployment)):
        assert waiting.is_alive(), outcome
        assert time.monotonic() < deadline, "no approval request in the decision log"
        time.sleep(0.2)
    assert power_states(deployment.vcenter)[VM.unknown] == "poweredOn"
    done = deployment.run(approver, request_id=ids[0])
    assert f"{ids[0]} approved: mcp__vsphere__power_off on {VM.unknown}" in done.stdout
    assert f'argument  name = "{VM.unknown}"' in done.stdout, done.stdout
    waiting.join(90)
    assert "error" not in outcome, outcome
    result = outcome["result"]
    assert not result.is_error, text_of(result)
    assert power_states(deployment.vcenter)[VM.unknown] == "poweredOff"
    approved = [r for r in deployment.log() if r.get("answer") == "approved"]
    assert approved, deployment.log()
    assert approved[-1]["approver"] == f"unix:{deployment.users['olivia']}", approved


def _the_page_lets_the_approver_in(deployment: Deployment) -> None:
    """The page the guide serves takes olivia's page password (the hash pasted in step 4)."""
    base = f"http://127.0.0.1:{deployment.ports['page']}"
    olivia = deployment.users["olivia"]
    with httpx.Client(base_url=base, timeout=30) as page:
        form = {"name": olivia, "password": PAGE_PASSWORD, "next": "/"}
        login = page.post("/login", data=form, headers={"Origin": base})
        assert login.status_code in (302, 303), login.text
        listing = page.get("/")
        assert listing.status_code == 200, listing.text
        assert olivia in listing.text, listing.text


def _requested(deployment: Deployment) -> list[str]:
    return [
        str(r["approval_id"])
        for r in deployment.log()
        if r.get("answer") == "requested" and r.get("approval_id")
    ]


def test_the_guide_uses_its_placeholders_only_where_the_table_says() -> None:
    """Every marked block's machine-specific value is one the substitution table lists."""
    text = GUIDE.read_text(encoding="utf-8")
    table = text.split("## What the test substitutes", 1)[1]
    for placeholder in (*GUIDE_PATHS, *USERS, "127.0.0.1:8750", "127.0.0.1:8751",
                        "https://zvm-hq.example.com", "https://zvm-dr.example.com",
                        "vc.example.com", REQUEST_ID,
                        PAGE_HASH, "/opt/zerto-rewind/bin/python"):  # fmt: skip
        assert f"`{placeholder}`" in table, placeholder
