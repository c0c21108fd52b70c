"""The approvals page's login limit in a real browser (headless Chromium, Selenium).

An agent posts wrong passwords for the approver's name over real HTTP from the
same loopback source; the approver, in the browser, still logs in within
seconds with the right password and is shown the failed attempts.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from support.browser import browser_errors, chrome, login, missing_browser, serve, wait_until
from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_web import build_approvals_app, hash_password

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(missing_browser() is not None, reason=missing_browser() or ""),
]

NAME, PASSWORD = "olivia", "correct horse"


def test_the_approver_logs_in_in_the_browser_despite_an_agents_guesses(tmp_path: Path) -> None:
    settings: Any = SimpleNamespace(
        approvals=ApprovalsSettings(web_approvers={NAME: hash_password(PASSWORD)}),
        gateway=SimpleNamespace(clients={"agent-1": "0" * 64}),
        state_url=None,
        state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"),
        log_path=str(tmp_path / "decisions.log"),
    )
    app = build_approvals_app(ApprovalsService(settings), secure_cookies=False)
    with serve(app) as base, chrome() as driver:
        with httpx.Client(follow_redirects=False, timeout=60) as agent:
            for n in range(7):
                answer = agent.post(f"{base}/login", data={"name": NAME, "password": f"g{n}"})
                assert answer.status_code == 401
        started = time.monotonic()
        login(driver, base, NAME, PASSWORD, timeout_s=20)
        assert time.monotonic() - started < 12, "the right password gets in within seconds"
        banner = wait_until(
            lambda: driver.find_elements("css selector", "#failed-logins"), 5, "no banner"
        )[0]
        assert "7 failed approver login(s)" in banner.text
        assert NAME in banner.text
        assert "loopback" in banner.text
        assert browser_errors(driver) == []
