"""The approvals page in a real browser: Debian's headless Chromium, driven by Selenium.

The app (gateway/approvals_web.py) runs under uvicorn on 127.0.0.1 over plain
HTTP, over a real ApprovalsService and FileApprovalStore. Requests are opened as
the MCP call path opens them (new_request, then store.open_request) while the
page is open: the page must show them by itself, run its script under its own
Content-Security-Policy, and record a click as the logged-in approver's decision.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from support.browser import (
    browser_errors,
    chrome,
    click_approve,
    deny,
    login,
    missing_browser,
    serve,
    wait_for_request,
    wait_until,
)
from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.core.approvals import ApprovalRequest, new_request
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_web import build_approvals_app, hash_password

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or ""),
]

NAME, PASSWORD = "olivia", "correct horse"


@pytest.fixture
def service(tmp_path: Path) -> ApprovalsService:
    settings: Any = SimpleNamespace(
        approvals=ApprovalsSettings(web_approvers={NAME: hash_password(PASSWORD)}),
        gateway=SimpleNamespace(clients={"agent-1": "0" * 64}),
        state_url=None,
        state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"),
        log_path=str(tmp_path / "decisions.log"),
    )
    return ApprovalsService(settings)


def open_request(service: ApprovalsService, vm: str, tool: str, **changes: Any) -> ApprovalRequest:
    fields: dict[str, Any] = {
        "tool": tool,
        "tool_input": {"vm": vm, "force": True},
        "vms": [vm],
        "row": "vm_unknown",
        "why": f"zerto-rewind: no VPG protects {vm}, so no checkpoint can be tagged.",
        "principal": "agent-1",
        "session": "4f2c9a1e",
        "host": "ci-runner-3",
        "vpg_status": [],
    }
    fields.update(changes)
    request, created = service.store.open_request(new_request(**fields))
    assert created
    return request


def state_of(service: ApprovalsService, request_id: str) -> tuple[str, str | None, str | None]:
    found = service.store.get(request_id)
    assert found is not None
    return found.state, found.decided_by, found.note


def test_approve_in_the_browser_and_the_page_updates_itself(
    service: ApprovalsService, tmp_path: Path
) -> None:
    first = open_request(service, "web-01", "power_off_vm")
    app = build_approvals_app(service, secure_cookies=False)
    with serve(app) as base, chrome() as driver:
        driver.get(f"{base}/")
        assert "/login" in driver.current_url  # not logged in: sent to log in
        login(driver, base, NAME, PASSWORD)
        card = wait_for_request(driver, first.id)
        assert "web-01" in card.text
        assert "power_off_vm" in card.text
        assert "VM unknown to Zerto" in card.text
        who = driver.find_element("css selector", ".who").text
        assert f"Signed in as {NAME}" in " ".join(who.split())

        confirmation = click_approve(driver, first.id)
        assert confirmation == f"Approved {first.id}: power_off_vm on web-01."
        wait_until(
            lambda: state_of(service, first.id)[0] == "approved", 5, "the store never said approved"
        )
        assert state_of(service, first.id) == ("approved", f"web:{NAME}", None)
        assert driver.find_elements("css selector", f'table.recent tr[data-request="{first.id}"]')

        # New requests while the page is open: they appear with no reload.
        driver.execute_script("window.zrNoReload = true;")
        second = open_request(
            service,
            "db-02",
            "delete_vm",
            row="failed",
            why="zerto-rewind: the checkpoint for vpg-db could not be tagged.",
            vpg_status=["vpg-db: failed (ZVM answered 503)"],
        )
        card = wait_for_request(driver, second.id, timeout_s=10)
        assert "db-02" in card.text
        assert "delete_vm" in card.text
        assert "no checkpoint can be made now" in card.text
        assert "vpg-db: failed (ZVM answered 503)" in card.text
        assert driver.execute_script("return window.zrNoReload === true;"), "the page reloaded"

        # A reason being typed survives the next redraw.
        box = card.find_element("css selector", "input[name=note]")
        box.send_keys("checking with the DBA")
        third = open_request(service, "app-03", "reconfigure_vm", row="no_vm", vms=[])
        wait_for_request(driver, third.id, timeout_s=10)
        box = driver.find_element(
            "css selector", f'article[data-request="{second.id}"] input[name=note]'
        )
        assert box.get_attribute("value") == "checking with the DBA"
        assert driver.execute_script("return window.zrNoReload === true;")

        shot = tmp_path / "approvals-page.png"
        driver.set_window_size(1280, 1700)
        assert driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        assert browser_errors(driver) == []  # no CSP violation, no script error


def test_a_link_to_a_request_comes_back_after_login(service: ApprovalsService) -> None:
    request = open_request(service, "web-07", "power_off_vm")
    app = build_approvals_app(service, secure_cookies=False)
    with serve(app) as base, chrome() as driver:
        driver.get(f"{base}/requests/{request.id}")  # the link a notification carries
        assert "/login?next=" in driver.current_url
        login(driver, base, NAME, PASSWORD)
        assert driver.current_url == f"{base}/requests/{request.id}"
        text = deny(driver, None, request.id, reason="change freeze until Monday")
        assert text == f"Denied {request.id}: power_off_vm on web-07."
        assert driver.current_url == f"{base}/requests/{request.id}"
        assert state_of(service, request.id) == (
            "denied",
            f"web:{NAME}",
            "change freeze until Monday",
        )
        decided = driver.find_element("css selector", f'article[data-request="{request.id}"]')
        assert decided.get_attribute("data-state") == "denied"
        assert "change freeze until Monday" in decided.text
        assert browser_errors(driver) == []
