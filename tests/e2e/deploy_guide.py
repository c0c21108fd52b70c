"""Running docs/deploy.md's marked blocks: the parser, the placeholders and the runner.

``guide_blocks`` reads every fenced block after a ``<!-- deploy-test: KIND … -->`` marker;
``Deployment`` holds the fresh root, the simulators and the values the guide's placeholders
become (the table at the end of the guide), and runs, writes or stands in for each block.
``tests/e2e/test_deploy_guide.py`` follows the guide with them.
"""

from __future__ import annotations

import contextlib
import json
import pwd
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from e2e.gateway_e2e import CONFIRMED_VPG, PYTHON, VM
from e2e.hosts_e2e import NODE_BIN
from support.realvm import MCVSPHERE_VENV, VCSIM_PASSWORD, VCSIM_USER, VCenter
from support.users import as_user, reachable_command
from zerto_rewind.testing import Sandbox

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
ZERTO_REWIND = str(Path(PYTHON).parent / "zerto-rewind")


def _console_python() -> str:
    """The interpreter the ``zerto-rewind`` command runs under (its ``#!`` line): what
    ``install mcp-host`` writes into the unit, so what the guide's ``bin/python`` stands for."""
    first = Path(ZERTO_REWIND).read_text(encoding="utf-8").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else PYTHON


MARKED = re.compile(r"<!-- deploy-test: (?P<marker>[^>]*?) -->\n```\w*\n(?P<body>.*?)\n```", re.S)
REQUEST_ID = "7K2Q-9XMA"  # the guide's placeholder for a request's id
PAGE_HASH = "scrypt$16384$8$1$<salt>$<hash>"  # the guide's placeholder for the page's hash
PAGE_PASSWORD = "olivia-page-password-0123"  # a throwaway loopback login
GUIDE_PATHS = ("/etc/zerto-rewind", "/var/lib/zerto-rewind", "/var/log/zerto-rewind",
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
USERS = {"zr-vsphere": "zrv-", "olivia": "zro-", "alice": "zra-"}


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
        values = {path: f"{self.root}{path}" for path in GUIDE_PATHS}
        values.update({
            "/opt/zerto-rewind/bin/python": _console_python(),
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
                self.reachable(["/bin/bash", "-e", "-c", body]), cwd=self.root / "work", env=env,
                input=stdin,
                capture_output=True, text=True, timeout=180, check=False,
            )  # fmt: skip
        assert done.returncode == 0, (
            f"{block.body}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
        return done

    def reachable(self, argv: list[str]) -> list[str]:
        """``argv``, as root, where other users reach this checkout (a 0700 clone's, too):
        the guide's ``runuser`` lines and the gateway start mcvsphere as its own user, and
        the test's stand-in mcvsphere reads the checkout's prepared one."""
        stage = self.root / "stage"
        stage.mkdir(mode=0o755, exist_ok=True)
        return reachable_command(argv, stage=stage)

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
            self.reachable(shlex.split(override[1])), env=env, cwd="/", stdin=subprocess.DEVNULL,
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
