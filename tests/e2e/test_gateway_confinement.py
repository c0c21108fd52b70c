"""The real mcvsphere behind the gateway, as a user of its own, cannot touch the guard's files.

mcvsphere's ``download_from_datastore`` writes any local path (``save_to``) and its
``upload_to_datastore`` reads one (``local_path``). Here the upstream runs as a fresh
``useradd`` user (``upstreams.vsphere.user``) and both tools are made read-only in the
catalog, so the guard lets every call through: what refuses them is the OS. Through
the gateway (an SDK client over stdio), the test tries to write the decision log and
a file in the state dir, and to upload the config and the ZVM secret file; each call
fails with a permission error, and every file is byte-for-byte what it was. The same
tools with paths the upstream's user owns work, so the refusals are not vcsim's.

The guard's files sit in directories any user may enter (0755), as in a deployment:
what protects them is their own owner and mode. The gateway runs as root inside a
mount namespace in which the upstream's user can reach this checkout's Python
(``support.users.reachable_command``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from e2e.gateway_e2e import GatewayRig, tool
from support.realvm import MCVSPHERE_BIN
from support.users import reachable_command, unix_user

pytestmark = pytest.mark.anyio
DATASTORE = "LocalDS_0"
TOOLS = ("download_from_datastore", "upload_to_datastore")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def rig() -> Iterator[GatewayRig]:
    base = Path(tempfile.mkdtemp(prefix="zr-e2e-confine-"))
    base.chmod(0o755)
    try:
        with unix_user("zr-mcvs-") as user, GatewayRig.running(base / "rig", http=False) as r:
            for path in (base / "rig", *(base / "rig").rglob("*")):
                if path.is_dir() and "vcsim" not in path.parts:
                    path.chmod(0o755)
            r.upstream_user = user.pw_name
            r.write_config()
            _both_tools_read_only(r)
            Path(r.box.log_path).touch(mode=0o600)
            Path(r.box.state_dir).mkdir(mode=0o700, exist_ok=True)
            own = base / "upstream-own"
            own.mkdir(mode=0o700)
            os.chown(own, user.pw_uid, user.pw_gid)
            yield r
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _both_tools_read_only(rig: GatewayRig) -> None:
    """The guard lets both tools through: the point is what the OS refuses."""
    path = Path(rig.box.config_path)
    config = json.loads(path.read_text())
    for name in TOOLS:
        config["tools"].pop(tool(name), None)
        if tool(name) not in config["read_only_tools"]:
            config["read_only_tools"].append(tool(name))
    path.write_text(json.dumps(config, indent=2))


def _digests(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


def _gateway(rig: GatewayRig) -> Client:
    stage = rig.root / "stage"
    stage.mkdir(mode=0o755, exist_ok=True)
    command, *args = reachable_command(rig.stdio_command(), stage=stage)
    env = {"PATH": os.environ["PATH"], **rig.gateway_env()}
    return Client(StdioServerParameters(command=command, args=args, env=env), cache=None)


def _refused(text: str) -> bool:
    return "Permission denied" in text or "PermissionError" in text or "Errno 13" in text


async def test_mcvsphere_cannot_read_or_write_the_guards_files(rig: GatewayRig) -> None:
    box = rig.box
    secret = rig.root / "zvm-secret"
    planted = Path(box.state_dir) / "planted"
    own = rig.root.parent / "upstream-own"
    guarded = [Path(box.config_path), secret, Path(box.log_path)]
    before = _digests(guarded)
    content = base64.b64encode(b"from the datastore\n").decode()
    async with _gateway(rig) as c:
        seeded = await c.call_tool(
            "upload_to_datastore",
            {"datastore": DATASTORE, "remote_path": "probe.txt", "content_base64": content},
        )
        assert not seeded.is_error, _text(seeded)
        # The controls: paths the upstream's own user may use work.
        saved = await c.call_tool(
            "download_from_datastore",
            {"datastore": DATASTORE, "path": "probe.txt", "save_to": str(own / "copy.txt")},
        )
        assert not saved.is_error, _text(saved)
        sent = await c.call_tool(
            "upload_to_datastore",
            {"datastore": DATASTORE, "remote_path": "back.txt",
             "local_path": str(own / "copy.txt")},
        )  # fmt: skip
        assert not sent.is_error, _text(sent)
        writes = {
            target: await c.call_tool(
                "download_from_datastore",
                {"datastore": DATASTORE, "path": "probe.txt", "save_to": target},
            )
            # (save_to = the state dir itself is a directory, for root too: a new file in it)
            for target in (box.log_path, str(planted))
        }
        reads = {
            source: await c.call_tool(
                "upload_to_datastore",
                {"datastore": DATASTORE, "remote_path": "stolen.txt", "local_path": source},
            )
            for source in (box.config_path, str(secret))
        }
    for target, result in {**writes, **reads}.items():
        assert _refused(_text(result)), (target, _text(result))
    assert _digests(guarded) == before
    assert not planted.exists()


def _first_unsearchable(path: Path) -> Path | None:
    """The first directory on the way to ``path`` (links resolved) other users cannot search."""
    for directory in reversed(Path(os.path.realpath(path)).parents):
        if not os.stat(directory).st_mode & 0o001:
            return directory
    return None


def test_an_interpreter_the_user_cannot_reach_stops_the_gateway_with_the_path(
    rig: GatewayRig,
) -> None:
    """The newcomer's case: mcvsphere's venv python links into a directory only root may
    search. Started as root without the test's namespace, the gateway does not serve:
    it names mcvsphere, its interpreter, the user and the directory, before any session."""
    interpreter = MCVSPHERE_BIN.parent / "python"
    hidden = _first_unsearchable(interpreter)
    if hidden is None:
        pytest.skip(f"{interpreter} is reachable by every user on this machine")
    env = {"PATH": os.environ["PATH"], **rig.gateway_env()}
    done = subprocess.run(
        rig.stdio_command(), env=env, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert f"cannot run {MCVSPHERE_BIN} (as user {rig.upstream_user}: " in done.stderr
    before = _first_unsearchable(MCVSPHERE_BIN.parent)
    if before is not None:  # a checkout in a 0700 directory: the way stops there first
        assert f"{before} is not searchable)" in done.stderr
        return
    assert f"the interpreter of {MCVSPHERE_BIN}, " in done.stderr
    assert f"{hidden} is not searchable, on the way through " in done.stderr
