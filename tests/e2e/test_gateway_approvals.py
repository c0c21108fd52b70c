"""Prompt rows through the gateway become approval requests that a person answers, for real.

A call the guard cannot checkpoint (here mcvsphere's ``power_off`` on ``VM.unknown``: in
vcsim, in no VPG) is not run on the agent's word. It opens an approval request in the
gateway's state and waits (``approvals.wait_s``); a person approves it on a channel the
agent cannot reach: the approvals socket (``zerto-rewind approvals``, the caller known by
the kernel, ``SO_PEERCRED``) or the approvals page (an approver login, in a browser).

The approver and the agent's unix user are real users (``useradd``, via
``tamper_e2e.agent_user``, removed afterwards). The CLI runs as them in the same private
mount namespace ``test_tamper`` uses: this checkout's venvs point at an interpreter under
``/root`` (0700), which ``subprocess.run(user=...)`` alone could not start. The socket sits
in a 0755 directory under /tmp, mode 0666: a refusal is the service's, not the file
system's.

Each gateway is ``zerto-rewind gateway --listen 127.0.0.1:0`` as root in front of the real
mcvsphere against govmomi's vCenter simulator (``gateway_e2e.GatewayRig``), with its own
config's ``approvals`` section and a fresh state directory. What happened is read from
vcsim (the VM's power state, pyVmomi) and the ZVM simulator (its tag counters: no tag can
exist for a VM in no VPG), and the decision log; never from the guard's own answer alone.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from selenium.webdriver.common.by import By

from e2e.fake_anthropic import call
from e2e.gateway_e2e import CLIENT_NAME, PYTHON, SERVER, TOKEN, VM, GatewayRig, tool
from e2e.harness import E2ESession, write_json
from e2e.tamper_e2e import Agent, agent_user
from support.browser import (
    chrome,
    click_approve,
    login,
    missing_browser,
    wait_for_request,
    wait_until,
)
from support.realvm import datastore_folders
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.gateway.request_state import APPROVAL_KEY

POWER_OFF = tool("power_off")  # mcvsphere's power_off, as the guard's catalog names it
TARGET = VM.unknown  # in vcsim, in no VPG: the vm_unknown prompt row
WAIT_S = 60.0  # how long a call waits for a person (approvals.wait_s)
WEB_NAME, WEB_PASSWORD = "olivia", "correct horse battery staple"
_STATES = itertools.count(1)


# ------------------------------------------------------------------------------ fixtures


@dataclass
class People:
    approver: Agent  # listed in approvals.approvers.users
    agent: Agent  # listed in approvals.agent_users: the user an agent would run as
    run_dir: Path  # 0755 under /tmp: where the approvals sockets are


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    assert os.geteuid() == 0, "these tests create users with useradd: run them as root"
    base = Path(tempfile.mkdtemp(prefix="zr-approvals-e2e-"))
    base.chmod(0o755)
    for sub in ("approver", "agent", "run"):
        (base / sub).mkdir()
        (base / sub).chmod(0o755)
    try:
        with agent_user(base / "approver") as approver, agent_user(base / "agent") as agent:
            yield People(approver, agent, base / "run")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayRig]:
    """vcsim + mcvsphere + the ZVM simulator; each test starts its own gateway (``guard``)."""
    with GatewayRig.running(tmp_path_factory.mktemp("gateway-approvals"), http=False) as r:
        yield r


@pytest.fixture(autouse=True)
def _target_on(rig: GatewayRig) -> Iterator[None]:
    """The unknown VM is on before each test, and on again after it, for other tests."""
    rig.power_on(TARGET)
    assert rig.power_states()[TARGET] == "poweredOn"
    yield
    rig.power_on(TARGET)


def socket_approvals(people: People, wait_s: float = WAIT_S) -> dict[str, Any]:
    return {
        "approvers": {"users": [people.approver.name]},
        "agent_users": [people.agent.name],
        "wait_s": wait_s,
    }


# ------------------------------------------------------------------------------ the guard


@dataclass
class Guard:
    """One ``zerto-rewind gateway`` process of a test, and what its ready file said."""

    proc: subprocess.Popen[bytes]
    ready: dict[str, Any]
    stderr: Path
    socket: Path | None
    config: Path

    @property
    def mcp_url(self) -> str:
        return str(self.ready["mcp"][SERVER])

    @property
    def page_url(self) -> str:
        return str(self.ready["approvals_url"])

    def stderr_text(self) -> str:
        return self.stderr.read_text(errors="replace")


@contextlib.contextmanager
def guard(
    rig: GatewayRig,
    approvals: dict[str, Any],
    *,
    socket: Path | None = None,
    page: bool = False,
) -> Iterator[Guard]:
    """The rig's config plus ``approvals`` (and a fresh state directory), served over HTTP."""
    n = next(_STATES)
    state = rig.root / f"state-{n}"
    state.mkdir(mode=0o700)
    config_path = Path(rig.write_config())
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["approvals"] = approvals
    config["state_dir"] = str(state)  # no request of an earlier test is joined
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")  # stays 0600
    ready_file = rig.root / f"gateway-{n}-ready.json"
    stderr = rig.root / f"gateway-{n}.stderr"
    args = [PYTHON, "-m", "zerto_rewind", "gateway", "--listen", "127.0.0.1:0",
            "--ready-file", str(ready_file), "--allow-privileged-upstream"]  # fmt: skip
    if socket is not None:
        args += ["--approvals-socket", str(socket)]
    if page:
        args += ["--approvals-listen", "127.0.0.1:0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ZERTO_")}
    env.update(rig.gateway_env())
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            args, env=env, cwd=rig.root, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not ready_file.exists() or (socket is not None and not socket.is_socket()):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gateway did not start: {stderr.read_text()}")
            time.sleep(0.05)
        ready = json.loads(ready_file.read_text())
        yield Guard(proc, ready, stderr, socket, config_path)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def approvals_as(who: Agent, socket: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``zerto-rewind approvals --service unix:SOCKET ARGS`` run as ``who`` (a real user).

    Its output is decoded without newline translation, so a raw CR would stay a CR."""
    argv = [PYTHON, "-m", "zerto_rewind", "approvals", "--service", f"unix:{socket}", *args]
    done = subprocess.run(
        who.command(argv),
        env={"PATH": "/usr/bin:/bin", "HOME": str(who.home), "LANG": "C.UTF-8",
             "PYTHONDONTWRITEBYTECODE": "1"},
        cwd=who.home,
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )  # fmt: skip
    out, err = done.stdout.decode(), done.stderr.decode(errors="replace")
    return subprocess.CompletedProcess(done.args, done.returncode, out, err)


def pending_as(who: Agent, socket: Path) -> list[dict[str, Any]]:
    listed = approvals_as(who, socket, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def wait_for_pending(who: Agent, socket: Path, timeout_s: float = 30) -> dict[str, Any]:
    """The one pending request, once the waiting call has opened it (listed as ``who``)."""
    found = wait_until(lambda: pending_as(who, socket), timeout_s, "no request was opened")
    assert len(found) == 1, found
    return dict(found[0])


def log_answers(records: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    """(answer, approver, approval_id) of each decision-log line about the target's power_off."""
    return [
        (str(r.get("answer")), r.get("approver"), r.get("approval_id"))
        for r in records
        if r.get("tool") == POWER_OFF and r.get("vms") == [TARGET]
    ]


# ------------------------------------------------------------------------------ the agent's client


@contextlib.asynccontextmanager
async def sdk_client(url: str, **kwargs: Any) -> AsyncIterator[Client]:
    """The official MCP SDK client over streamable HTTP with the agent's own bearer token."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = httpx2.Timeout(30.0, read=WAIT_S + 60)
    async with (
        httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
        Client(streamable_http_client(url, http_client=http), cache=None, **kwargs) as c,
    ):
        yield c


def accepting(seen: list[Any]) -> Any:
    """An elicitation callback that says yes to whatever it is asked (the agent's own yes)."""

    async def callback(context: Any, params: Any) -> types.ElicitResult:
        seen.append(params)
        if getattr(params, "mode", None) == "url" or hasattr(params, "url"):
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"approve": True})

    return callback


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@dataclass
class WaitingCall:
    """The agent's power_off on the target, made in a thread of its own while a person acts."""

    url: str
    mode: str = "auto"
    progress: list[str] = field(default_factory=list)
    elicited: list[Any] = field(default_factory=list)
    result: types.CallToolResult | None = None
    error: BaseException | None = None
    took_s: float = 0.0
    _thread: threading.Thread | None = None

    def start(self) -> WaitingCall:
        self._thread = threading.Thread(target=self._run, name="waiting-call", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self.result = anyio.run(self._call)
        except BaseException as exc:  # reported by finish()
            self.error = exc
        self.took_s = time.monotonic() - started

    async def _call(self) -> types.CallToolResult:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append(message or "")

        async with sdk_client(
            self.url, elicitation_callback=accepting(self.elicited), mode=self.mode
        ) as c:
            return await c.call_tool(
                "power_off",
                {"name": TARGET},
                read_timeout_seconds=WAIT_S + 60,
                progress_callback=on_progress,
            )

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def finish(self, timeout_s: float = WAIT_S + 30) -> types.CallToolResult:
        assert self._thread is not None
        self._thread.join(timeout_s)
        assert not self._thread.is_alive(), "the call did not come back"
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


# ------------------------------------------------------------------------------ the tests


def test_the_agents_own_yes_leaves_the_vm_on(rig: GatewayRig, people: People) -> None:
    """The agent's own SDK client, with its own token, says yes in every way it can: an
    elicitation callback that accepts anything (both connect modes; the gateway asks it
    nothing) and a forged "approve" input response sent with the call. Each call is refused
    naming one waiting request (the retries join it); vcsim still shows the VM on, and the
    ZVM was asked for no tag."""
    socket = people.run_dir / "own-yes.sock"
    tags_before = rig.box.tag_requests()
    log_start = len(rig.log())
    seen: list[Any] = []
    forged: types.InputResponses = {
        APPROVAL_KEY: types.ElicitResult(action="accept", content={"approve": True})
    }

    async def attempts(url: str) -> list[types.CallToolResult]:
        results = []
        for mode in ("auto", "legacy"):
            async with sdk_client(url, elicitation_callback=accepting(seen), mode=mode) as c:
                results.append(await c.call_tool("power_off", {"name": TARGET}))
        async with sdk_client(url, elicitation_callback=accepting(seen)) as c:
            results.append(await c.call_tool("power_off", {"name": TARGET}, input_responses=forged))
        return results

    with guard(rig, socket_approvals(people, wait_s=3), socket=socket) as g:
        results = anyio.run(attempts, g.mcp_url)
        assert g.proc.poll() is None, g.stderr_text()
        (request,) = pending_as(people.approver, socket)

    rid = request["id"]
    # No question was put to the agent's client: it has nothing to answer "yes" to.
    assert [asked for asked in seen if not hasattr(asked, "url")] == []
    for result in results:
        assert result.is_error, text_of(result)
        assert f"request {rid} is waiting for an approver" in text_of(result)
        assert f"zerto-rewind approvals approve {rid}" in text_of(result)
    assert (request["tool"], request["vms"], request["row"]) == (POWER_OFF, [TARGET], "vm_unknown")
    assert (request["principal"], request["state"]) == (CLIENT_NAME, "pending")
    # what really happened: the VM is on in the vCenter; the ZVM made no tag
    assert rig.power_states()[TARGET] == "poweredOn"
    assert rig.box.tag_requests() == tags_before
    answers = log_answers(rig.log_since(log_start))
    assert answers == [("requested", None, rid)] + [("waiting", None, rid)] * len(results)


def test_an_approver_approves_with_the_cli_and_the_call_runs(
    rig: GatewayRig, people: People
) -> None:
    """The call waits (with progress notifications). The agent's unix user runs the same CLI:
    refused ("agents cannot approve"), the request stays pending. The approver lists it and
    approves it: the waiting call completes and vcsim shows the VM off."""
    socket = people.run_dir / "cli.sock"
    tags_before = rig.box.tag_requests()
    log_start = len(rig.log())
    with guard(rig, socket_approvals(people), socket=socket) as g:
        waiting = WaitingCall(g.mcp_url).start()
        request = wait_for_pending(people.approver, socket)
        rid = request["id"]
        assert (request["tool"], request["vms"], request["principal"]) == (
            POWER_OFF, [TARGET], CLIENT_NAME,
        )  # fmt: skip
        # The agent's user, on the same socket: refused, for listing and for approving.
        for action in (["approve", rid], ["list", "--json"]):
            refused = approvals_as(people.agent, socket, *action)
            assert refused.returncode == 1, refused.stdout
            assert "agents cannot approve" in refused.stderr, refused.stderr
            assert f"unix:{people.agent.name}" in refused.stderr
        shown = approvals_as(people.approver, socket, "show", rid, "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["state"] == "pending"
        assert rig.power_states()[TARGET] == "poweredOn"
        assert waiting.running()
        # The gateway tells a waiting client every 5 s that it is still waiting.
        wait_until(lambda: waiting.progress, 20, "no progress notification while waiting")
        assert f"waiting for a person to approve request {rid}" in waiting.progress[0]

        approved = approvals_as(people.approver, socket, "approve", rid)
        assert approved.returncode == 0, approved.stderr
        assert f"{rid} approved" in approved.stdout
        result = waiting.finish()
        assert g.proc.poll() is None, g.stderr_text()

    assert not result.is_error, text_of(result)
    assert f"VM '{TARGET}' powered off" in text_of(result)  # mcvsphere's own answer
    # … and the guard's note: no rewind point, who approved it and when.
    assert "this call ran with no rewind point" in text_of(result)
    assert f"unix:{people.approver.name} approved this call at " in text_of(result)
    assert rig.power_states()[TARGET] == "poweredOff"
    assert rig.box.tag_requests() == tags_before  # no VPG: nothing to tag, nothing tagged
    who = f"unix:{people.approver.name}"
    answers = log_answers(rig.log_since(log_start))
    assert answers == [("requested", None, rid), ("approved", who, rid), ("used", who, rid),
                       ("approved", who, rid)], answers  # fmt: skip
    assert all(people.agent.name not in str(a) for a in answers)
    (ran,) = [r for r in rig.log_since(log_start) if r.get("origin") == "gateway"]
    assert ran["elapsed_ms"] >= 5000  # it waited for the person, past a progress tick


DATASTORE = "LocalDS_0"  # vcsim's first host datastore
MKDIR = tool("create_datastore_folder")  # names no VM: the catalog's decision is prompt


def test_two_calls_that_differ_in_one_value_look_different_and_only_the_approved_runs(
    rig: GatewayRig, people: People
) -> None:
    """The issue's blind approval, on mcvsphere: two ``create_datastore_folder`` calls that
    differ only in ``path`` (one with an ESC sequence in it). The approver's real CLI shows
    each path whole, marks where the two differ, and prints no raw control byte; the
    approver approves the one they mean, its retry runs, and vcsim's datastore browser
    shows that folder and not the other."""
    socket = people.run_dir / "differ.sock"
    suffix = os.urandom(3).hex()
    meant, other = f"zr-scratch-{suffix}", f"zr-keep-{suffix}\x1b[2K\rzr-scratch-{suffix}"

    async def ask(url: str, paths: tuple[str, ...]) -> list[types.CallToolResult]:
        async with sdk_client(url) as c:
            return [
                await c.call_tool("create_datastore_folder", {"datastore": DATASTORE, "path": p})
                for p in paths
            ]

    with guard(rig, socket_approvals(people, wait_s=0.5), socket=socket) as g:
        asked = anyio.run(ask, g.mcp_url, (meant, other))
        assert all(r.is_error and "waiting for an approver" in text_of(r) for r in asked)
        pending = {r["id"]: r for r in pending_as(people.approver, socket)}
        assert len(pending) == 2
        assert {r["tool"] for r in pending.values()} == {MKDIR}
        listing = approvals_as(people.approver, socket, "list")
        assert listing.returncode == 0, listing.stderr
        shows = {rid: approvals_as(people.approver, socket, "show", rid) for rid in pending}
        for text in [listing.stdout, *(done.stdout for done in shows.values())]:
            assert not set(text) & {"\x1b", "\r", "\x07", "\u202e"}, text
        assert listing.stdout.count("differs from the most similar other") == 2
        (rid,) = [rid for rid, done in shows.items() if f'path = "{meant}"' in done.stdout]
        (other_id,) = set(pending) - {rid}
        assert f'path = "zr-keep-{suffix}\\x1b[2K\\rzr-scratch-{suffix}"' in (
            shows[other_id].stdout
        )
        approved = approvals_as(people.approver, socket, "approve", rid)
        assert approved.returncode == 0, approved.stderr
        ran = anyio.run(ask, g.mcp_url, (meant, other))

    assert not ran[0].is_error, text_of(ran[0])
    assert "this call ran with no rewind point" in text_of(ran[0])
    assert ran[1].is_error
    assert other_id in text_of(ran[1])
    folders = datastore_folders(rig.vcenter, DATASTORE)
    assert meant in folders, (folders, text_of(ran[0]))
    assert not [f for f in folders if f.startswith("zr-keep-")], folders


def test_past_the_cap_a_padded_path_and_a_key_with_escapes_on_mcvsphere(
    rig: GatewayRig, people: People
) -> None:
    """The rest of the issue's blind spots, on mcvsphere and vcsim, as the real approver:

    * ``download_from_datastore`` with a ``save_to`` padded by 300 ``./`` before a ``../``:
      ``show`` names the file it would really write, and ``show --full`` gives the value whole;
    * a call whose argument *key* holds ESC and CR reaches the approver's terminal only as
      visible text;
    * with ``max_open_per_principal: 2``, the third call is refused at once, naming the cap,
      and logged ``capped``;
    * nothing ran: vcsim has neither folder, the padded target was never written;
    * the gateway stopped, its log's last lines cut: ``log --verify`` fails, naming the cut.
    """
    socket = people.run_dir / "bounds.sock"
    suffix = os.urandom(3).hex()
    target = rig.root / f"outside-{suffix}.txt"
    padded = f"{rig.root}/downloads-{suffix}/" + "./" * 300 + f"../outside-{suffix}.txt"
    key = "note\x1b[2K\rpath"
    folders = (f"zr-key-{suffix}", f"zr-capped-{suffix}")

    async def ask(url: str) -> list[types.CallToolResult]:
        async with sdk_client(url) as c:
            download = {"datastore": DATASTORE, "path": "x.txt", "save_to": padded}
            return [
                await c.call_tool("download_from_datastore", download),
                await c.call_tool(
                    "create_datastore_folder",
                    {"datastore": DATASTORE, "path": folders[0], key: "x"},
                ),
                await c.call_tool(
                    "create_datastore_folder", {"datastore": DATASTORE, "path": folders[1]}
                ),
            ]

    approvals = {**socket_approvals(people, wait_s=0.5), "max_open_per_principal": 2}
    with guard(rig, approvals, socket=socket) as g:
        started = time.monotonic()
        opened_download, opened_key, capped = anyio.run(ask, g.mcp_url)
        assert time.monotonic() - started < 20
        for opened in (opened_download, opened_key):
            assert opened.is_error
            assert "waiting for an approver" in text_of(opened), text_of(opened)
        assert capped.is_error
        assert "approvals.max_open_per_principal: 2" in text_of(capped), text_of(capped)
        pending = {r["tool"]: r["id"] for r in pending_as(people.approver, socket)}
        assert set(pending) == {tool("download_from_datastore"), MKDIR}, pending
        shown = approvals_as(
            people.approver, socket, "show", pending[tool("download_from_datastore")]
        )
        whole = approvals_as(
            people.approver, socket, "show", pending[tool("download_from_datastore")], "--full"
        )
        keyed = approvals_as(people.approver, socket, "show", pending[MKDIR])
        listing = approvals_as(people.approver, socket, "list")
        config = g.config
    for done in (shown, whole, keyed, listing):
        assert done.returncode == 0, done.stderr
        assert not set(done.stdout) & {"\x1b", "\r", "\x07", "\u202e"}, done.stdout
    assert f"resolves to {target}" in shown.stdout, shown.stdout
    assert "characters not shown" in shown.stdout
    assert padded in whole.stdout
    assert '["note\\x1b[2K\\rpath"] = "x"' in keyed.stdout, keyed.stdout
    assert not target.exists()
    made = datastore_folders(rig.vcenter, DATASTORE)
    assert not [f for f in made if f in folders], made

    records = rig.log()
    assert [r for r in records if r.get("answer") == "capped" and r.get("tool") == MKDIR]
    lines = Path(rig.box.log_path).read_bytes().splitlines(keepends=True)
    Path(rig.box.log_path).write_bytes(b"".join(lines[:-2]))
    verify = subprocess.run(
        [PYTHON, "-m", "zerto_rewind", "log", "--verify", "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert verify.returncode == 1, verify.stdout + verify.stderr
    assert verify.stdout.startswith("log CUT:"), verify.stdout
    assert "2 lines cut from its end" in verify.stdout, verify.stdout


@pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or "")
def test_an_approver_approves_on_the_page_in_a_browser(rig: GatewayRig, people: People) -> None:
    """The gateway serves the approvals page; a real MCP client's call waits; headless
    Chromium logs in as a page approver, sees the request appear, clicks Approve; the call
    completes and vcsim shows the VM off."""
    approvals = {"web_approvers": {WEB_NAME: hash_password(WEB_PASSWORD)}, "wait_s": WAIT_S}
    tags_before = rig.box.tag_requests()
    log_start = len(rig.log())
    with guard(rig, approvals, page=True) as g:
        base = g.page_url
        assert base.startswith("http://127.0.0.1:")
        with chrome() as driver:
            login(driver, base, WEB_NAME, WEB_PASSWORD)
            waiting = WaitingCall(g.mcp_url).start()
            cards = wait_until(
                lambda: driver.find_elements(By.CSS_SELECTOR, "article.request"),
                30,
                "the waiting request did not appear on the page",
            )
            rid = cards[0].get_attribute("data-request")
            assert rid
            card = wait_for_request(driver, rid)
            assert TARGET in card.text
            assert rig.power_states()[TARGET] == "poweredOn"
            assert waiting.running()
            flash = click_approve(driver, rid)
            assert flash.startswith("Approved"), flash
        result = waiting.finish()
        assert g.proc.poll() is None, g.stderr_text()

    assert not result.is_error, text_of(result)
    assert f"VM '{TARGET}' powered off" in text_of(result)
    assert f"web:{WEB_NAME} approved this call at " in text_of(result)
    assert rig.power_states()[TARGET] == "poweredOff"
    assert rig.box.tag_requests() == tags_before
    # The client was shown the request's page (URL elicitation); its "accept" approved
    # nothing by itself: the call ran only after the click.
    assert [getattr(asked, "url", None) for asked in waiting.elicited] == [f"{base}/requests/{rid}"]
    who = f"web:{WEB_NAME}"
    answers = log_answers(rig.log_since(log_start))
    assert ("approved", who, rid) in answers, answers
    assert ("used", who, rid) in answers, answers


def test_claude_code_waits_and_runs_once_a_person_approves(
    rig: GatewayRig, people: People, e2e: E2ESession, tmp_path: Path
) -> None:
    """The real Claude Code CLI in ``-p``, its only vSphere server the gateway over HTTP with
    a token. The scripted model powers off the unknown VM; the call waits; a thread approves
    it with the CLI as the approver user; Claude's call completes, the model is sent
    mcvsphere's answer, and vcsim shows the VM off."""
    socket = people.run_dir / "claude.sock"
    tags_before = rig.box.tag_requests()
    log_start = len(rig.log())
    e2e.script([[call(POWER_OFF, name=TARGET)], "powered off once approved"])
    approver_saw: list[dict[str, Any]] = []
    approver_errors: list[BaseException] = []
    approvals_done: list[subprocess.CompletedProcess[str]] = []

    def approve_when_asked() -> None:
        try:
            request = wait_for_pending(people.approver, socket, timeout_s=90)
            approver_saw.append(request)
            time.sleep(6)  # let the call wait past one progress tick
            approvals_done.append(approvals_as(people.approver, socket, "approve", request["id"]))
        except BaseException as exc:  # reported below
            approver_errors.append(exc)

    with guard(rig, socket_approvals(people), socket=socket) as g:
        entry = {"type": "http", "url": g.mcp_url, "headers": {"Authorization": f"Bearer {TOKEN}"}}
        e2e.mcp_config = write_json(tmp_path / "gateway-mcp.json", {"mcpServers": {SERVER: entry}})
        approver = threading.Thread(target=approve_when_asked, name="approver", daemon=True)
        approver.start()
        # Claude Code's MCP tool timeout (ms) must outlast the wait for a person.
        run = e2e.run(env={"MCP_TOOL_TIMEOUT": str(int((WAIT_S + 60) * 1000))}, timeout=240)
        approver.join(30)
        assert g.proc.poll() is None, g.stderr_text()
        gateway_log = g.stderr_text()

    assert not approver_errors, approver_errors
    assert run.ok, run.describe()
    (request,) = approver_saw
    rid = request["id"]
    (approved,) = approvals_done
    assert approved.returncode == 0, approved.stderr
    assert (request["tool"], request["vms"], request["principal"]) == (
        POWER_OFF, [TARGET], CLIENT_NAME,
    )  # fmt: skip
    assert run.result == "powered off once approved"
    # what the model was sent: mcvsphere's own answer, not an error
    (told,) = e2e.api.tool_results()
    assert not told.is_error, told.text
    assert f"VM '{TARGET}' powered off" in told.text
    # what really happened
    assert rig.power_states()[TARGET] == "poweredOff", gateway_log
    assert rig.box.tag_requests() == tags_before
    who = f"unix:{people.approver.name}"
    answers = log_answers(rig.log_since(log_start))
    assert ("approved", who, rid) in answers, answers
    assert ("used", who, rid) in answers, answers
    assert [a for a in answers if a[0] in ("waiting", "expired")] == [], answers
    (ran,) = [r for r in rig.log_since(log_start) if r.get("origin") == "gateway"]
    assert ran["host"].startswith("claude-code ")
    assert ran["elapsed_ms"] >= 5000  # Claude's call really waited for the person
