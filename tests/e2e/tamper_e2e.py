"""An agent that tries to switch the guard off, run as a real unprivileged user.

The pieces ``test_tamper.py`` binds together:

- ``agent_user(base)`` creates a user with ``useradd`` (the tests run as root), gives it a
  home and a project of its own, and removes it — and any process still running as it —
  afterwards (``userdel``). Everything of the guard's stays root's: the gateway's config,
  ZVM secret, state directory and decision log live in a 0700 directory owned by root.
- ``Agent.run(...)`` runs the pinned Claude Code CLI **as that user**, in a private mount
  namespace of its own (``unshare --mount``, then ``setpriv`` to drop to the user), against
  the scripted model on loopback. The namespace does two things and nothing else:

  * the interpreter of this checkout's venvs lives under ``/root`` (pyenv), and the checkout
    itself may sit in a 0700 directory (a ``mktemp -d``, root's home): others may not
    traverse either. Inside the namespace each such directory is an empty 0755 one with
    only that interpreter's prefix and this checkout bound into it (read-only as ever: root
    owns them), so the agent's user can run the venv's Python — the hook, mcvsphere —
    exactly as installed. Nothing else there is visible to the agent, and nothing changes
    outside the namespace (``support.users.namespace_command``);
  * with ``managed=DIR``, DIR is bound onto ``/etc/claude-code``: Claude Code's managed
    settings (the system-wide policy file) for that run only, so concurrent tests on this
    machine never see them. ``/etc/claude-code`` is created empty if missing (the mount
    point) and removed at the end if this module created it.

- ``GuardService`` is ``gateway_e2e.GatewayRig`` (vcsim + mcvsphere + the ZVM simulator
  whose estate uses vcsim's VM names) with its one gateway process run as root over HTTP on
  loopback **and** on a unix socket (the guard service thin hooks ask), its files root's.

What happened to a VM is read back from the vCenter simulator (``power_states``), never
from the guard's answer.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pwd
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.gateway_e2e import PYTHON, SERVER, GatewayRig
from e2e.harness import ClaudeRun, claude_env, claude_path, make_home, write_json
from support.users import namespace_command

__all__ = [
    "MANAGED_DIR",
    "Agent",
    "GuardService",
    "agent_user",
    "digest",
    "give",
    "managed_mount_point",
    "tree_digest",
]

MANAGED_DIR = Path("/etc/claude-code")
_AGENT_PATH = "/usr/local/bin:/usr/bin:/bin"
_CLAUDE_TIMEOUT_S = 150.0


def digest(path: Path | str) -> str:
    """SHA-256 of a file's bytes ("" when it is missing)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return ""


def tree_digest(root: Path | str) -> dict[str, tuple[str, int]]:
    """{relative path: (sha256 or "dir"/"link:TARGET", owner uid)} of everything under root."""
    found: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                kind = "link:" + os.readlink(path)
            elif stat.S_ISDIR(info.st_mode):
                kind = "dir"
            else:
                kind = digest(path)
            found[os.path.relpath(path, root)] = (kind, info.st_uid)
    return found


def give(path: Path, uid: int, gid: int) -> None:
    """chown -R path to the user (the agent's own files)."""
    os.chown(path, uid, gid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), uid, gid)


# ----------------------------------------------------------------------------- the user


@dataclass
class Agent:
    """The unprivileged user who runs Claude Code, and its files."""

    name: str
    uid: int
    gid: int
    area: Path  # 0700, the user's: home, project, tmp
    stage: Path  # root's, 0755: what the namespace puts on each directory others cannot traverse
    runs: list[ClaudeRun] = field(default_factory=list)

    @property
    def home(self) -> Path:
        return self.area / "home"

    @property
    def project(self) -> Path:
        return self.area / "project"

    @property
    def tmp(self) -> Path:
        return self.area / "tmp"

    def own(self, path: Path) -> Path:
        """Make ``path`` (under the agent's area) the agent's, recursively."""
        give(path, self.uid, self.gid)
        return path

    def write_json(self, path: Path, data: Any) -> Path:
        write_json(path, data)
        os.chown(path, self.uid, self.gid)
        return path

    def command(self, argv: Sequence[str], *, managed: Path | None = None) -> list[str]:
        """``argv`` run as the agent, in its namespace (see the module docstring)."""
        binds = [(managed, MANAGED_DIR)] if managed is not None else []
        return namespace_command(self.uid, self.gid, argv, stage=self.stage, binds=binds)

    def env(self, api_url: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = claude_env(api_url, self.home)
        env.pop("IS_SANDBOX", None)  # that is for root; this user needs no exemption
        env.update(
            {
                "PATH": _AGENT_PATH,
                "USER": self.name,
                "LOGNAME": self.name,
                "SHELL": "/bin/bash",
                "TMPDIR": str(self.tmp),
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        )
        env.update(extra or {})
        return env

    def sh(self, script: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A shell command as the agent, in its namespace (for checks outside Claude Code)."""
        return subprocess.run(
            self.command(["/bin/bash", "-c", script]),
            capture_output=True,
            text=True,
            timeout=timeout,
            env={"PATH": _AGENT_PATH, "HOME": str(self.home), "LANG": "C.UTF-8"},
            cwd=self.project,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def run(
        self,
        *,
        api_url: str,
        mcp_config: Path,
        prompt: str = "Do the scripted VM work.",
        managed: Path | None = None,
        settings: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        timeout: float = _CLAUDE_TIMEOUT_S,
    ) -> ClaudeRun:
        """``claude -p`` as the agent in bypassPermissions, its only MCP servers ``mcp_config``."""
        claude = claude_path(check_version=False)
        args = [str(claude), "-p", prompt, "--output-format", "json",
                "--mcp-config", str(mcp_config), "--strict-mcp-config",
                "--permission-mode", "bypassPermissions"]  # fmt: skip
        if settings is not None:
            args += ["--settings", str(settings)]
        command = self.command(args, managed=managed)
        started = time.monotonic()
        proc = subprocess.run(
            command,
            cwd=self.project,
            env=self.env(api_url, extra_env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        run = ClaudeRun(
            args=command,
            returncode=proc.returncode,
            stdout=proc.stdout,
            stderr=proc.stderr,
            duration=time.monotonic() - started,
            data=_last_json(proc.stdout),
        )
        self.runs.append(run)
        return run


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


@contextlib.contextmanager
def agent_user(base: Path) -> Iterator[Agent]:
    """A fresh unprivileged user with a home and a project under ``base``; removed after."""
    name = "zrtamper" + secrets.token_hex(3)
    area = base / "agent"
    stage = base / "stage"
    subprocess.run(
        ["useradd", "--no-create-home", "--home-dir", str(area / "home"),
         "--shell", "/bin/bash", "--user-group", name],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    try:
        info = pwd.getpwnam(name)
        agent = Agent(name, info.pw_uid, info.pw_gid, area, stage)
        for path in (area, agent.home, agent.project, agent.tmp):
            path.mkdir(mode=0o700, exist_ok=True)
        make_home(agent.home, agent.project)
        agent.own(area)
        area.chmod(0o700)
        stage.mkdir(mode=0o755, exist_ok=True)
        yield agent
    finally:
        _end_processes_of(name)
        subprocess.run(["userdel", name], check=False, capture_output=True)
        shutil.rmtree(area, ignore_errors=True)
        _remove_stage(stage)


def _remove_stage(stage: Path) -> None:
    """rmdir only: the stage holds empty mount points, never files (no rm -r over a mount)."""
    if not stage.exists():
        return
    for dirpath, _dirs, _files in sorted(os.walk(stage), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def _end_processes_of(name: str) -> None:
    """Stop, one pid at a time, whatever still runs as this test's own user."""
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        return
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid == uid:
                os.kill(int(entry), 9)
        except OSError:
            continue


@contextlib.contextmanager
def managed_mount_point() -> Iterator[Path]:
    """``/etc/claude-code`` exists (an empty mount point) while the module runs."""
    created = not MANAGED_DIR.exists()
    if created:
        MANAGED_DIR.mkdir(mode=0o755)
    try:
        yield MANAGED_DIR
    finally:
        if created:
            with contextlib.suppress(OSError):
                MANAGED_DIR.rmdir()


# ----------------------------------------------------------------------------- the guard


@dataclass
class GuardService(GatewayRig):
    """The gateway of ``gateway_e2e`` run as root, over HTTP and on a unix socket.

    ``socket_path`` is beside ``root`` (in ``root.parent / "run"``, 0755), because ``root``
    holds the config, secret, state and log and is 0700.
    """

    socket_path: Path | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self._proc is not None, "the gateway is not running"
        return self._proc

    def _start_http(self) -> None:
        run_dir = self.root.parent / "run"
        run_dir.mkdir(mode=0o755, exist_ok=True)
        self.socket_path = run_dir / "guard.sock"
        ready = self.root / "gateway-ready.json"
        stderr = self.root / "gateway.stderr"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
        env.update(self.gateway_env())
        with stderr.open("wb") as err:
            self._proc = subprocess.Popen(
                [PYTHON, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
                 "--also-socket", str(self.socket_path), "--socket-mode", "0666",
                 "--ready-file", str(ready), "--allow-privileged-upstream"],
                env=env, cwd=self.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not ready.exists() or not self.socket_path.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._stop_http()
                raise AssertionError(f"gateway did not start: {stderr.read_text()}")
            time.sleep(0.05)
        self.http_url = json.loads(ready.read_text())["mcp"][SERVER]

    def secrets(self) -> dict[str, str]:
        """Every secret the guard holds that the agent must never see, by name."""
        found = {"zvm client secret": self.box.sim.credentials["client_secret"]}
        token_files = Path(self.box.state_dir).rglob("*")
        for path in token_files:
            if path.is_file() and "token" in path.name:
                with contextlib.suppress(OSError, ValueError):
                    data = json.loads(path.read_text())
                    token = data.get("access_token") if isinstance(data, dict) else None
                    if isinstance(token, str) and len(token) > 16:
                        found[f"zvm token ({path.name})"] = token
        return found
