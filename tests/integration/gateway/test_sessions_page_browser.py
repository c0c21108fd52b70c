"""The sessions view of the approvals page over a real socket, over decisions the real
hook logged: over HTTP with a logged-in session, and in headless Chromium.

The hook runs as installed against the embedded ZVM simulator (real TLS); the
page (gateway/approvals_web.py) runs under uvicorn on 127.0.0.1 and reads that log.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.browser import browser_errors, chrome, login, missing_browser, serve
from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_web import build_approvals_app, hash_password
from zerto_rewind.testing import Sandbox

pytestmark = pytest.mark.slow

NAME, PASSWORD = "olivia", "correct horse"
POWER_OFF = "mcp__vsphere__power_off_vm"


@pytest.fixture(scope="module")
def decisions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A log of two sessions: one changes a VM (and is denied once), the other changes it later."""
    root = tmp_path_factory.mktemp("sessions-page")
    with Sandbox(str(root / "box"), guard={"timeout_s": 10}) as box:
        box.write_config()
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id="sess-one", tool_use_id="a1")
        box.run_hook(POWER_OFF, {"name": "sql-paused-1"}, session_id="sess-one")
        box.run_hook(POWER_OFF, {"name": "jp-ubuntu"}, session_id="sess-two", tool_use_id="b1")
        yield box.log_path


@pytest.fixture
def app(decisions: str, tmp_path: Path) -> Any:
    settings: Any = SimpleNamespace(
        approvals=ApprovalsSettings(web_approvers={NAME: hash_password(PASSWORD)}),
        gateway=SimpleNamespace(clients={}),
        state_url=None,
        state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"),
        log_path=decisions,
    )
    return build_approvals_app(ApprovalsService(settings), secure_cookies=False)


def test_sessions_over_http_with_a_logged_in_session(app: Any) -> None:
    with serve(app) as base, httpx.Client(base_url=base, follow_redirects=False) as http:
        assert http.get("/sessions").status_code == 303  # not logged in
        answer = http.post("/login", data={"name": NAME, "password": PASSWORD, "next": "/sessions"})
        assert answer.headers["location"] == "/sessions"
        listing = http.get("/sessions")
        assert listing.status_code == 200
        assert listing.text.index("sess-two") < listing.text.index("sess-one")
        page = http.get("/sessions/sess-o")  # an id's start works
        assert page.status_code == 200
        svg = re.search(r"<svg class=\"timeline\".*?</svg>", page.text, flags=re.S)
        assert svg is not None
        lanes = re.findall(r'<g class="lane" data-vm="([^"]*)"', svg.group(0))
        assert lanes == ["jp-ubuntu", "sql-paused-1"]
        assert svg.group(0).count('class="mark change"') == 1
        assert svg.group(0).count('class="mark denied"') == 1
        assert svg.group(0).count('class="mark checkpoint"') == 1  # the hook's checkpoint
        assert svg.group(0).count('class="mark other"') == 1  # sess-two, later
        assert "style=" not in page.text
        css = http.get("/static/app.css").text
        assert "svg.timeline .mark.checkpoint" in css
        assert http.get("/sessions/unknown").status_code == 404


@pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or "")
def test_sessions_in_the_browser_under_the_page_csp(app: Any, tmp_path: Path) -> None:
    with serve(app) as base, chrome() as driver:
        driver.get(f"{base}/sessions")
        login(driver, base, NAME, PASSWORD, next_path="/sessions")
        driver.find_element("css selector", "#nav-sessions")
        driver.find_element("link text", "sess-one").click()
        svg = driver.find_element("css selector", "svg.timeline")
        assert svg.size["width"] > 600  # laid out by the static CSS, full width
        marks = driver.find_elements("css selector", "svg.timeline .mark.change")
        assert len(marks) == 1
        fill = marks[0].value_of_css_property("fill")
        assert fill not in ("", "none", "rgb(0, 0, 0)")  # the stylesheet's colour applied
        rows = driver.find_elements("css selector", "table.timeline-table tbody tr")
        assert len(rows) == 2
        assert "checkpoint" in rows[0].text
        shot = tmp_path / "session-page.png"
        assert driver.save_screenshot(str(shot))
        print(f"screenshot: {shot}")
        assert browser_errors(driver) == []  # no CSP violation, no script error
