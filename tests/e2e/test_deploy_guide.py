"""docs/deploy.md, followed in a fresh directory standing in for ``/``.

The guide's own blocks are run, not copies of them: every fenced block after a
``<!-- deploy-test: KIND … -->`` marker, in the page's order, with the substitutions the
page lists under "What the test substitutes" (paths under a fresh root, fresh user names,
free loopback ports, the simulators' addresses and logins). So a command, an option or a
config key the product no longer takes fails here.

- ``run`` (``as=USER``, ``stdin=zvm-secret``): ``bash -e -c`` as root, or as that user;
- ``file PATH mode=OCTAL``: the block is written to PATH;
- ``mcvsphere``: the venv line runs; the ``pip install`` line must pin what
  ``scripts/realvm-setup`` installs, and is replaced by that prepared mcvsphere (nothing is
  fetched).

Real parts: ``useradd`` users, govmomi's vCenter simulator with the real mcvsphere started by
the gateway as its own user, the ZVM simulator over TLS, the gateway started with the
drop-in's ``ExecStart`` (the unit ``install mcp-host`` wrote, checked to be its prefix), the
Codex and Claude Code files ``install mcp-host`` wrote (the agent's calls use their URLs and
tokens), ``doctor`` as the guide runs it, and the approver's CLI as the approver's user on
the approvals socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from e2e.gateway_e2e import CONFIRMED_VPG, PYTHON, SIM_CADENCES, VM
from e2e.harness import claude_path, write_json
from e2e.hosts_e2e import HOSTS, NODE_BIN, host_path
from support.ports import free_port
from support.realvm import (
    MCVSPHERE_VENV,
    VCSIM_PASSWORD,
    VCSIM_USER,
    VCenter,
    power_states,
    setup_problems,
    start_vcsim,
)
from support.users import as_user
from zerto_rewind.testing import Sandbox, fast_sim_config

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
ZERTO_REWIND = str(Path(PYTHON).parent / "zerto-rewind")
MARKED = re.compile(r"<!-- deploy-test: (?P<marker>[^>]*?) -->\n```\w*\n(?P<body>.*?)\n```", re.S)
REQUEST_ID = "7K2Q-9XMA"  # the guide's placeholder for a request's id
PAGE_HASH = "scrypt$16384$8$1$<salt>$<hash>"  # the guide's placeholder for the page's hash
PAGE_PASSWORD = "olivia-page-password-0123"  # a throwaway loopback login
_GUIDE_PATHS = ("/etc/zerto-rewind", "/var/lib/zerto-rewind", "/var/log/zerto-rewind",
                "/run/zerto-rewind", "/etc/systemd/system", "/opt/mcvsphere", "/home/olivia",
                "/home/alice")  # fmt: skip
_ASYNC_TIMEOUT = "from asyncio import timeout, timeout_at\n\n__all__ = ['timeout', 'timeout_at']\n"
# The guide's two sites, each with its own ZVM: the confirmed VM's VPG protected at hq,
# recovered at dr; the VM the approver lets through is in no VPG.
TWO_SITES: dict[str, Any] = {
    "sites": [{"name": site, "kind": "vcenter", "zvm": True, "client_id": "zerto-rewind"}
              for site in ("hq", "dr")],
    "vpgs": [{"name": CONFIRMED_VPG, "site_kind": "vcenter", "protected_site": "hq",
              "recovery_site": "dr", "vms": [VM.confirmed]}],
}  # fmt: skip
_USERS = {"zr-vsphere": "zrv-", "olivia": "zro-", "alice": "zra-"}


@dataclass(frozen=True)
class Block:
    kind: str
    args: tuple[str, ...]
    options: dict[str, str]
    body: str


def guide_blocks(text: str) -> list[Block]:
    """The marked blocks of the guide, in order."""
    blocks = []
    for found in MARKED.finditer(text):
        kind, *rest = found["marker"].split()
        options = dict(word.split("=", 1) for word in rest if "=" in word)
        args = tuple(word for word in rest if "=" not in word)
        blocks.append(Block(kind, args, options, found["body"]))
    return blocks


@dataclass
class Deployment:
    """The fresh root, the simulators, and the values the guide's placeholders become."""

    root: Path
    vcenter: VCenter
    box: Sandbox
    users: dict[str, str]
    ports: dict[str, int]
    replacements: dict[str, str] = field(default_factory=dict)
    gateway: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        values = {path: f"{self.root}{path}" for path in _GUIDE_PATHS}
        values.update({
            "/opt/zerto-rewind/bin/python": PYTHON,
            "127.0.0.1:8750": f"127.0.0.1:{self.ports['gateway']}",
            "127.0.0.1:8751": f"127.0.0.1:{self.ports['page']}",
            "https://zvm-hq.example.com": self.box.sites["hq"]["url"],
            "https://zvm-dr.example.com": self.box.sites["dr"]["url"],
            "vc.example.com": self.vcenter.host,
            "svc-agents@vsphere.local": VCSIM_USER,
            "CHANGE-ME-vcenter-password": VCSIM_PASSWORD,
            # the simulator's certificate is self-signed
            'VCENTER_INSECURE = "false"': 'VCENTER_INSECURE = "true"',
            '"VCENTER_INSECURE": "false"': '"VCENTER_INSECURE": "true"',
        })  # fmt: skip
        self.replacements = values

    def substitute(self, text: str) -> str:
        """The guide's text with this deployment's paths, names, ports and addresses."""
        keys = sorted(self.replacements, key=len, reverse=True)
        words = "|".join(rf"(?<![\w/.-]){re.escape(w)}(?![\w])" for w in self.users)
        command = r"(?<![^\s;&|(])zerto-rewind(?=\s)"  # in a command's place only
        pattern = "|".join([*(re.escape(k) for k in keys), words, command])

        def one(match: re.Match[str]) -> str:
            found = match[0]
            if found in self.replacements:
                return self.replacements[found]
            return self.users.get(found, ZERTO_REWIND)

        return re.sub(pattern, one, text)

    def path(self, guide_path: str) -> Path:
        return Path(self.substitute(guide_path))

    # ---- running the blocks ---------------------------------------------------------------

    def run(
        self, block: Block, *, request_id: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        body = self.substitute(block.body)
        if request_id is not None:
            body = body.replace(REQUEST_ID, request_id)
        site = block.options.get("stdin")
        stdin = None if site is None else self.box.sites[site]["client_secret"]
        if "as" in block.options:
            user = self.users[block.options["as"]]
            env = {"HOME": pwd.getpwnam(user).pw_dir, "PATH": f"{NODE_BIN}:/usr/bin:/bin"}
            env.update({"LANG": "C.UTF-8", "NO_COLOR": "1", "TERM": "dumb"})
            # Loopback only: no telemetry, error reports, auto-update or release notes.
            env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
            done: subprocess.CompletedProcess[str] = as_user(
                user, ["/bin/bash", "-e", "-c", body], env=env, timeout=120
            )
        else:
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8"}
            done = subprocess.run(
                ["/bin/bash", "-e", "-c", body], cwd=self.root / "work", env=env, input=stdin,
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
        assert done.returncode == 0, (
            f"{block.body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
        return done

    def write(self, block: Block) -> Path:
        target = self.path(block.args[0])
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(self.substitute(block.body) + "\n", encoding="utf-8")
        target.chmod(int(block.options["mode"], 8))
        return target

    def install_mcvsphere(self, block: Block) -> None:
        """The venv line runs; the pip line is checked against the setup script, then
        stood in for by the prepared mcvsphere (a .pth and the console script pip writes)."""
        venv_line, pip_line = block.body.splitlines()
        requirements = shlex.split(pip_line)[shlex.split(pip_line).index("install") + 1 :]
        setup = (ROOT / "scripts" / "realvm-setup").read_text()
        (pinned,) = re.findall(r"^MCVSPHERE_REQUIREMENTS=\((.*)\)$", setup, re.M)
        assert requirements == shlex.split(pinned)
        self.run(Block("run", (), {}, venv_line))
        venv = self.path("/opt/mcvsphere")
        (site,) = venv.glob("lib/python3*/site-packages")
        (cached,) = MCVSPHERE_VENV.glob("lib/python3*/site-packages")
        (site / "zz-prepared-mcvsphere.pth").write_text(f"{cached}\n")
        # redis (under fastmcp) wants the async-timeout wheel on a Python before 3.11.3, and
        # pip would install it by its marker; the prepared venv's Python is newer, so it has
        # none. asyncio's own timeout is what that wheel is on later Pythons.
        (site / "async_timeout.py").write_text(_ASYNC_TIMEOUT)
        script = venv / "bin" / "mcvsphere"
        kept = (MCVSPHERE_VENV / "bin" / "mcvsphere").read_text().splitlines()[1:]
        script.write_text("\n".join([f"#!{venv / 'bin' / 'python'}", *kept]) + "\n")
        script.chmod(0o755)

    # ---- the service ----------------------------------------------------------------------

    def start_gateway(self, drop_in: Path) -> None:
        """The drop-in's ExecStart, as systemd would run it, after checking it against the unit."""
        unit = self.path("/etc/systemd/system/zerto-rewind-gateway.service").read_text()
        (exec_start,) = re.findall(r"^ExecStart=(.+)$", unit, re.M)
        environment = dict(
            line.split("=", 1) for line in re.findall(r"^Environment=(.+)$", unit, re.M)
        )
        override = [line for line in re.findall(r"^ExecStart=(.*)$", drop_in.read_text(), re.M)]
        assert override[0] == "", "the drop-in must clear the unit's ExecStart first"
        assert override[1].startswith(exec_start + " "), (override[1], exec_start)
        if shutil.which("systemd-analyze"):  # reads the drop-in beside the unit too
            unit_path = self.path("/etc/systemd/system/zerto-rewind-gateway.service")
            verified = subprocess.run(
                ["systemd-analyze", "verify", str(unit_path)],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            for complaint in ("Unknown key", "Invalid", "Failed to parse", "not executable"):
                assert complaint not in verified.stderr, verified.stderr
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", **environment}
        self._runtime_directory(drop_in.read_text())
        err = (self.root / "gateway.stderr").open("wb")
        self.gateway = subprocess.Popen(
            shlex.split(override[1]), env=env, cwd="/", stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
        err.close()
        url = f"http://127.0.0.1:{self.ports['gateway']}/healthz"
        deadline = time.monotonic() + 90
        while True:
            assert self.gateway.poll() is None, (self.root / "gateway.stderr").read_text()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=5).status_code == 200:
                    return
            assert time.monotonic() < deadline, (self.root / "gateway.stderr").read_text()
            time.sleep(0.3)

    def _runtime_directory(self, drop_in: str) -> None:
        """What systemd makes before it starts the service: /run/NAME, root's, with its mode."""
        (name,) = re.findall(r"^RuntimeDirectory=(.+)$", drop_in, re.M)
        (mode,) = re.findall(r"^RuntimeDirectoryMode=([0-7]+)$", drop_in, re.M)
        runtime = self.root / "run" / name
        runtime.mkdir(mode=int(mode, 8))
        runtime.chmod(int(mode, 8))

    def stop_gateway(self) -> None:
        proc, self.gateway = self.gateway, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def log(self) -> list[dict[str, Any]]:
        path = self.path("/var/log/zerto-rewind/decisions.log")
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


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
    users = {name: prefix + secrets.token_hex(3) for name, prefix in _USERS.items()}
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
    for placeholder in (*_GUIDE_PATHS, *_USERS, "127.0.0.1:8750", "127.0.0.1:8751",
                        "https://zvm-hq.example.com", "https://zvm-dr.example.com",
                        "vc.example.com", REQUEST_ID,
                        PAGE_HASH, "/opt/zerto-rewind/bin/python"):  # fmt: skip
        assert f"`{placeholder}`" in table, placeholder
