"""A session's rewind on the approvals page, through the real gateway process.

The gateway (``zerto-rewind gateway --approvals-listen``) serves the page over TLS on
127.0.0.1 and runs rewinds against the in-process ZVM simulator over TLS. The
session's log lines are written as the guard writes them, naming checkpoints the
simulator's journal really holds. What the simulator did is read back from it: the
restores it was asked for (with their checkpoint), its request counters, its VPGs.
"""

from __future__ import annotations

import re
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from integration.gateway.gateway_helpers import (
    TOKENS,
    GatewayProcess,
    gateway_config,
    gateway_process,
)
from support.browser import browser_errors, chrome, login, missing_browser, wait_until
from support.sim import sim_config, sim_settings
from support.sim_changes import log_change as log_change_to
from support.sim_changes import sim_requests
from zerto_rewind.core.decisions_log import iter_records
from zerto_rewind.gateway.approvals_web import hash_password
from zerto_rewind.sim import recovery as sim_recovery
from zerto_rewind.sim.certs import write_certs
from zerto_rewind.testing import Sandbox
from zerto_rewind.zvm.client import ZvmClient

pytestmark = pytest.mark.slow

WEB, PASSWORD = "olivia", "correct horse battery"
AGENT_PASSWORD = "agent's own password"


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Sandbox]:
    """vpg-00001 holds vm-00001 and vm-00002; vpg-00002 holds vm-00003."""
    config = sim_config(vms=3, vms_per_vpg=2, task_duration_s=0.3)
    with Sandbox(str(tmp_path / "box"), sim_config=config, guard={"timeout_s": 10}) as sandbox:
        yield sandbox


@pytest.fixture
def zvm(box: Sandbox) -> Iterator[ZvmClient]:
    """The test's own client of the simulator, for tags and reads."""
    with ZvmClient(sim_settings(box.sim)) as client:
        yield client


@pytest.fixture
def restores(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(VM id, checkpoint id) of each restore the simulator was asked to start."""
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(sim_recovery, "restore", recording(sim_recovery.restore, asked))
    return asked


def recording(restore: Any, asked: list[tuple[str, str]]) -> Any:
    """The simulator's restore, noting first the VM and the checkpoint it was asked for."""

    def noted(backend: Any, vm_id: str, body: dict[str, Any]) -> Any:
        asked.append((vm_id, str(body.get("checkpointidentifier"))))
        return restore(backend, vm_id, body)

    return noted


@contextmanager
def page_gateway(box: Sandbox, tmp_path: Path, *, tls: bool) -> Iterator[GatewayProcess]:
    """The gateway with its approvals page (over TLS, or plain HTTP on loopback for the
    browser); ``agent-a`` is a token's name and a page login too."""
    certs = write_certs(tmp_path / "tls")
    gateway_config(
        box,
        tmp_path / "actions.jsonl",
        gateway={"tls_cert": str(certs.cert), "tls_key": str(certs.key)} if tls else {},
        approvals={
            "approvers": {"users": ["root"]},
            "web_approvers": {
                WEB: hash_password(PASSWORD),
                "agent-a": hash_password(AGENT_PASSWORD),
            },
        },
    )
    args = ("--approvals-listen", "127.0.0.1:0")
    with gateway_process(box, tmp_path, extra_args=args) as process:
        process.info = {**(process.info or {}), "ca": str(certs.ca)}
        yield process


@pytest.fixture
def gw(box: Sandbox, tmp_path: Path) -> Iterator[GatewayProcess]:
    """The gateway serving its page over TLS."""
    with page_gateway(box, tmp_path, tls=True) as process:
        assert process.info is not None
        assert process.info["approvals_url"].startswith("https://127.0.0.1:")
        yield process


def page(gw: GatewayProcess) -> httpx.Client:
    """A browser-like client of the page: TLS verified against the test CA, no redirects."""
    assert gw.info is not None
    context = ssl.create_default_context(cafile=gw.info["ca"])
    return httpx.Client(base_url=gw.info["approvals_url"], verify=context, timeout=30)


@contextmanager
def logged_in(gw: GatewayProcess) -> Iterator[httpx.Client]:
    """The page's client, logged in as the approver."""
    with page(gw) as http:
        answer = http.post("/login", data={"name": WEB, "password": PASSWORD, "next": "/"})
        assert answer.status_code == 303, answer.text
        yield http


def log_change(box: Sandbox, zvm: ZvmClient, session: str, vm: str) -> tuple[str, str]:
    """A change to ``vm`` by ``session`` after a tagged checkpoint: (VM id, checkpoint id)."""
    return log_change_to(Path(box.log_path), zvm, session, vm)


def open_plan(http: httpx.Client, session: str) -> tuple[str, str, str]:
    """The session's plan page: (its HTML, the plan id, the form's CSRF token)."""
    shown = http.get(f"/rewind/session/{session}")
    assert shown.status_code == 200, shown.text
    plan_id = re.search(r'id="plan-id">([0-9a-f]{16})<', shown.text)
    csrf = re.search(r'name="csrf" value="([^"]+)"', shown.text)
    assert plan_id is not None
    assert csrf is not None
    return shown.text, plan_id.group(1), csrf.group(1)


def finished(http: httpx.Client, plan_id: str) -> dict[str, Any]:
    """The run's JSON once it is no longer checking or running."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        run: dict[str, Any] = http.get(f"/api/rewinds/{plan_id}").json()
        if not run["active"]:
            return run
        time.sleep(0.2)
    raise AssertionError(f"rewind {plan_id} still running")


def steps(box: Sandbox) -> list[dict[str, Any]]:
    return [r for r in iter_records(box.log_path) if r.get("event_type") == "rewind.step"]


def test_an_approver_runs_the_plan_on_the_page(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """The plan as the dry run shows it; the run restores and commits each VM, logs each step
    naming the approver, and a second start of the same plan id restores nothing again."""
    first = log_change(box, zvm, "s1", "vm-00001")
    third = log_change(box, zvm, "s1", "vm-00003")
    with logged_in(gw) as http:
        assert 'id="plan-rewind"' in http.get("/sessions/s1").text
        text, plan_id, csrf = open_plan(http, "s1")
        assert f"checkpoint {first[1]} tagged zr s1 vm-00001" in text
        assert "vm-00002" in text  # what a failover of vpg-00001 would also move
        assert sim_requests(box.sim).get("POST vms.restore", 0) == 0  # the plan changed nothing
        started = http.post("/rewind/start", data={"csrf": csrf, "plan": plan_id})
        assert started.status_code == 303
        assert started.headers["location"].endswith(f"/rewinds/{plan_id}")
        run = finished(http, plan_id)
        assert run["state"] == "finished", run
        results = run["report"]["results"]
        assert [(r["vm"], r["state"], r["vm_state"]) for r in results] == [
            ("vm-00001", "done", "restored"),
            ("vm-00003", "done", "restored"),
        ]
        assert [p["percent"] for p in run["progress"]] == [100, 100]
        shown = http.get(f"/rewinds/{plan_id}").text
        assert "Every VM is done." in shown
        assert 'data-active="0"' in shown
        again = http.post("/rewind/start", data={"csrf": csrf, "plan": plan_id})
        assert again.status_code == 303
        replay = finished(http, plan_id)
    assert restores == [first, third]
    assert sim_requests(box.sim)["POST vms.restore_commit"] == 2
    assert all(not v.restores for v in box.sim.world.vpgs.values())
    assert replay["state"] == "refused"
    assert "was already run (restore)" in replay["error"]
    logged = steps(box)
    assert [s["step"] for s in logged].count("commit") == 2
    assert {s["client"] for s in logged} == {f"web:{WEB}"}


def test_no_session_no_csrf_an_agent_or_an_unknown_plan_runs_nothing(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """Refused before the plan is read: no login, an agent token, an agent token's name as a
    login, no or a wrong CSRF token, another site's form, a plan id never built."""
    log_change(box, zvm, "s1", "vm-00001")
    with logged_in(gw) as http:
        _, plan_id, csrf = open_plan(http, "s1")
        form = {"csrf": csrf, "plan": plan_id}
        assert http.post("/rewind/start", data={"plan": plan_id}).status_code == 403
        assert http.post("/rewind/start", data={**form, "csrf": "x" * 43}).status_code == 403
        foreign = http.post("/rewind/start", data=form, headers={"Origin": "https://evil.test"})
        assert foreign.status_code == 403
        unknown = http.post("/rewind/start", data={**form, "plan": "0123456789abcdef"})
        assert unknown.status_code == 404
        assert "Nothing was run" in unknown.text
        failover = http.post("/rewind/start", data={**form, "mode": "failover"})
        assert failover.status_code == 400  # no VPG name typed
    with page(gw) as anonymous:
        assert anonymous.post("/rewind/start", data=form).status_code == 403
        assert anonymous.get(f"/rewinds/{plan_id}").status_code == 303  # to the login
        bearer = {"Authorization": f"Bearer {TOKENS['agent-a']}"}
        assert anonymous.post("/rewind/start", data=form, headers=bearer).status_code == 403
        assert anonymous.get(f"/api/rewinds/{plan_id}", headers=bearer).status_code == 401
        agent = anonymous.post("/login", data={"name": "agent-a", "password": AGENT_PASSWORD})
        assert agent.status_code == 403  # an agent token's name never logs in
        assert anonymous.post("/rewind/start", data=form).status_code == 403
    assert restores == []
    assert sim_requests(box.sim).get("POST vms.restore", 0) == 0
    assert sim_requests(box.sim).get("POST vpgs.failover", 0) == 0
    assert steps(box) == []


def test_a_plan_that_moved_is_refused_naming_what_moved(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """Another session changes the VM after the plan was shown: refused, named, nothing run."""
    log_change(box, zvm, "s1", "vm-00001")
    with logged_in(gw) as http:
        _, plan_id, csrf = open_plan(http, "s1")
        log_change(box, zvm, "s2", "vm-00001")
        assert http.post("/rewind/start", data={"csrf": csrf, "plan": plan_id}).status_code == 303
        run = finished(http, plan_id)
        shown = http.get(f"/rewinds/{plan_id}").text
    assert run["state"] == "refused"
    assert "refused: since the dry run, vm-00001: log" in run["error"]
    assert "Nothing was changed" in run["error"]
    assert 'id="plan-again"' in shown
    assert restores == []
    assert sim_requests(box.sim).get("POST vms.restore", 0) == 0
    assert [s["step"] for s in steps(box)] == ["refused"]


def test_a_fault_partway_then_resume_on_the_page(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """The second VM's commit fails: rolled back, the first stays restored, the page offers a
    resume, and the resume restores the second only."""
    log_change(box, zvm, "s1", "vm-00001")
    third, _ = log_change(box, zvm, "s1", "vm-00003")
    context = ssl.create_default_context(cafile=box.sim.ca_bundle)
    with logged_in(gw) as http, httpx.Client(verify=context) as control:
        _, plan_id, csrf = open_plan(http, "s1")
        fault = {"route": f"POST /v1/vms/{third}/RestoreCommit", "kind": "status", "status": 503}
        control.post(f"{box.sim.url}/_sim/faults", json=fault).raise_for_status()
        http.post("/rewind/start", data={"csrf": csrf, "plan": plan_id})
        run = finished(http, plan_id)
        states = {r["vm"]: (r["state"], r["vm_state"]) for r in run["report"]["results"]}
        assert states == {"vm-00001": ("done", "restored"), "vm-00003": ("failed", "untouched")}
        shown = http.get(f"/rewinds/{plan_id}").text
        assert 'id="rewind-resume-restore"' in shown
        control.delete(f"{box.sim.url}/_sim/faults").raise_for_status()
        form = {"csrf": csrf, "plan": plan_id, "mode": "restore", "resume": "1"}
        assert http.post("/rewind/start", data=form).status_code == 303
        resumed = finished(http, plan_id)
    assert resumed["state"] == "finished", resumed
    assert [r[0] for r in restores] == [restores[0][0], third, third]  # vm-00001 not again
    assert sim_requests(box.sim)["POST vms.restore_rollback"] == 1
    assert all(not v.restores for v in box.sim.world.vpgs.values())


def test_test_mode_starts_a_failover_test_and_restores_nothing(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """``test``: a failover test of the VPG from the same checkpoint; production untouched."""
    vm_id, checkpoint = log_change(box, zvm, "s1", "vm-00001")
    with logged_in(gw) as http:
        _, plan_id, csrf = open_plan(http, "s1")
        http.post("/rewind/start", data={"csrf": csrf, "plan": plan_id, "mode": "test"})
        run = finished(http, plan_id)
    assert run["state"] == "finished", run
    assert run["report"]["results"][0]["vm_state"] == "test running"
    test = box.sim.world.vpgs_by_name["vpg-00001"].test
    assert test is not None
    assert (test.checkpoint_id, test.vm_ids) == (checkpoint, (vm_id,))
    assert restores == []
    assert {s["mode"] for s in steps(box)} == {"test"}


@pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or "")
def test_in_the_browser_the_run_is_followed_under_the_page_csp(
    box: Sandbox, zvm: ZvmClient, tmp_path: Path, restores: list[Any]
) -> None:
    """Headless Chromium: session, plan, Run; the page's script follows the run to its
    report with no reload by hand, and the CSP reports no violation."""
    log_change(box, zvm, "s1", "vm-00001")
    with page_gateway(box, tmp_path, tls=False) as process, chrome() as driver:
        assert process.info is not None
        base = process.info["approvals_url"]
        login(driver, base, WEB, PASSWORD, next_path="/sessions")
        driver.get(f"{base}/sessions/s1")
        driver.find_element(By.ID, "plan-rewind").click()
        wait_until(lambda: driver.find_elements(By.ID, "plan-id"), 20, "the plan page")
        driver.find_element(By.ID, "rewind-start").click()
        verdict = wait_until(
            lambda: driver.find_elements(By.ID, "run-verdict"), 60, "the run's report"
        )
        assert verdict[0].text == "Every VM is done."
        rows = driver.find_elements(By.CSS_SELECTOR, "#live table.report tbody tr")
        assert [r.get_attribute("data-vm") for r in rows] == ["vm-00001"]
        bars = driver.find_elements(By.CSS_SELECTOR, "table.progress-table progress")
        assert [b.get_attribute("value") for b in bars] == ["100"]
        assert browser_errors(driver) == []
    assert len(restores) == 1


def test_failover_runs_only_for_the_vpg_typed(
    box: Sandbox, zvm: ZvmClient, gw: GatewayProcess, restores: list[Any]
) -> None:
    """``failover``: a wrong VPG name runs nothing; the name typed fails the whole VPG over,
    committed with reverse protection, and the report names the other VM it moved."""
    log_change(box, zvm, "s1", "vm-00001")
    vpg = box.sim.world.vpgs_by_name["vpg-00001"]
    protected = vpg.protected.name
    with logged_in(gw) as http:
        text, plan_id, csrf = open_plan(http, "s1")
        assert "type its name to fail it over" in text
        form = {"csrf": csrf, "plan": plan_id, "mode": "failover"}
        wrong = http.post("/rewind/start", data={**form, "confirm-0": "vpg-0000"})
        assert wrong.status_code == 400
        assert sim_requests(box.sim).get("POST vpgs.failover", 0) == 0
        assert (
            http.post("/rewind/start", data={**form, "confirm-0": "vpg-00001"}).status_code == 303
        )
        run = finished(http, plan_id)
    assert run["state"] == "finished", run
    assert "also moved vm-00002" in run["report"]["results"][0]["why"]
    assert vpg.protected.name != protected
    assert sim_requests(box.sim)["POST vpgs.failover_commit"] == 1
    assert restores == []
