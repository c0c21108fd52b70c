"""A real browser on the approvals page: Debian's headless Chromium, driven by Selenium.

For tests that need a person's clicks on the page (gateway/approvals_web.py):
the page's own browser test, and the end-to-end test where an MCP call waits
until someone approves it. Nothing is downloaded: the driver and the browser are
Debian's (``apt-get install chromium chromium-driver``, as scripts/test does), and
Selenium Manager is kept offline (``SE_OFFLINE=true``)::

    from support.browser import approve, chrome, login, missing_browser, serve

    pytestmark = pytest.mark.skipif(missing_browser() is not None, reason=...)

    with serve(build_approvals_app(service, secure_cookies=False)) as base, chrome() as driver:
        login(driver, base, "olivia", "pw")
        approve(driver, base, request_id)   # opens /requests/<id>, clicks Approve

With the real gateway (``gateway --approvals-listen 127.0.0.1:PORT``) skip
:func:`serve` and pass ``http://127.0.0.1:PORT`` as ``base``.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, cast

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.expected_conditions import staleness_of
from selenium.webdriver.support.ui import WebDriverWait

__all__ = [
    "approve",
    "browser_errors",
    "chrome",
    "click_approve",
    "deny",
    "login",
    "missing_browser",
    "serve",
    "wait_for_request",
    "wait_until",
]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def missing_browser() -> str | None:
    """Why a browser test cannot run here (a reason for ``pytest.skip``), or None."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    if missing:
        return (
            f"{' and '.join(missing)} not installed: the approvals page's browser tests need "
            "Debian's `apt-get install chromium chromium-driver` (scripts/test installs them)"
        )
    return None


@contextmanager
def chrome(*, width: int = 1280, height: int = 1100) -> Iterator[WebDriver]:
    """A headless Chromium (Debian's binary and driver, never a download), quit after use."""
    before = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not reach the network
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={width},{height}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=shutil.which("chromedriver") or CHROMEDRIVER)
    try:
        driver = webdriver.Chrome(service=service, options=options)
    finally:
        if before is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = before
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()


@contextmanager
def serve(app: Any, host: str = "127.0.0.1") -> Iterator[str]:
    """``app`` under uvicorn on ``host``:<a free port>, in a thread; yields the base URL.

    The socket is bound before uvicorn starts, so no other process can take the port.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, host=host, port=port, lifespan="off", ws="none", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="approvals-page", daemon=True
    )
    thread.start()
    try:
        wait_until(lambda: server.started, 10, "uvicorn did not start")
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def wait_until(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """``check()``'s first truthy value, polled every 50 ms; AssertionError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (waited {timeout_s} s)")
        time.sleep(0.05)


def login(
    driver: WebDriver,
    base_url: str,
    name: str,
    password: str,
    *,
    next_path: str | None = None,
    timeout_s: float = 10,
) -> None:
    """Log in on /login (or on the login page the browser is already showing).

    ``next_path``: where the page should send the browser after login (``/requests/<id>``).
    Waits until the browser has left the login page.
    """
    if "/login" not in driver.current_url:
        suffix = f"?next={next_path}" if next_path else ""
        driver.get(f"{base_url}/login{suffix}")
    driver.find_element(By.ID, "name").clear()
    driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "password").send_keys(password)
    driver.find_element(By.ID, "login").click()
    try:
        WebDriverWait(driver, timeout_s).until(
            lambda d: d.execute_script("return document.body.dataset.page") != "login"
        )
    except TimeoutException:
        shown = driver.find_elements(By.CSS_SELECTOR, ".flash.err")
        text = shown[0].text if shown else "(no message)"
        raise AssertionError(f"login as {name} failed: {text}") from None


def wait_for_request(driver: WebDriver, request_id: str, timeout_s: float = 10) -> WebElement:
    """The request's card on the page the browser shows, once it is there (no reload)."""
    selector = f'article.request[data-request="{request_id}"]'
    card = _first(driver, selector, timeout_s)
    if card is None:
        raise AssertionError(f"request {request_id} did not appear on {driver.current_url}")
    return card


def _first(driver: WebDriver, selector: str, timeout_s: float) -> WebElement | None:
    """The first element matching a CSS selector, once there is one; None at the timeout."""
    try:
        found: list[WebElement] = WebDriverWait(driver, timeout_s).until(
            lambda d: d.find_elements(By.CSS_SELECTOR, selector)
        )
    except TimeoutException:
        return None
    return found[0]


def _click(driver: WebDriver, request_id: str, action: str, timeout_s: float) -> str:
    """Click one of a card's buttons; the confirmation the page shows after the redirect."""
    selector = f'article.request[data-request="{request_id}"] button.{action}'
    deadline = time.monotonic() + timeout_s
    old_page = driver.find_element(By.TAG_NAME, "html")
    while True:  # the page may redraw itself between finding and clicking
        try:
            wait_for_request(driver, request_id, timeout_s)
            driver.find_element(By.CSS_SELECTOR, selector).click()
            break
        except StaleElementReferenceException:
            if time.monotonic() > deadline:
                raise
    try:
        WebDriverWait(driver, timeout_s).until(staleness_of(old_page))  # the form was posted
    except TimeoutException:
        raise AssertionError(f"{action} of {request_id}: the form was not sent") from None
    flash = _first(driver, ".flash", timeout_s)
    if flash is None:
        raise AssertionError(f"no confirmation after {action} of {request_id}")
    return flash.text


def click_approve(driver: WebDriver, request_id: str, timeout_s: float = 10) -> str:
    """Click Approve on the request's card on the current page; the page's confirmation."""
    return _click(driver, request_id, "approve", timeout_s)


def approve(driver: WebDriver, base_url: str, request_id: str, timeout_s: float = 10) -> str:
    """Open /requests/<id> (the notification's link) and click Approve; the confirmation.

    The browser must be logged in (:func:`login`); the page's error message
    (expired, already decided) raises AssertionError.
    """
    driver.get(f"{base_url}/requests/{request_id}")
    text = click_approve(driver, request_id, timeout_s)
    if not text.startswith("Approved"):
        raise AssertionError(f"approving {request_id}: {text}")
    return text


def deny(
    driver: WebDriver,
    base_url: str | None,
    request_id: str,
    reason: str = "",
    timeout_s: float = 10,
) -> str:
    """Deny with ``reason``: on /requests/<id> when ``base_url`` is given, else the current page."""
    if base_url is not None:
        driver.get(f"{base_url}/requests/{request_id}")
    card = wait_for_request(driver, request_id, timeout_s)
    if reason:
        card.find_element(By.CSS_SELECTOR, "input[name=note]").send_keys(reason)
    text = _click(driver, request_id, "deny", timeout_s)
    if not text.startswith("Denied"):
        raise AssertionError(f"denying {request_id}: {text}")
    return text


def browser_errors(driver: WebDriver) -> list[str]:
    """Console errors since the last call (CSP violations, script errors), favicon aside."""
    return [
        entry["message"]
        for entry in cast(Any, driver).get_log("browser")  # Chromium's, not in WebDriver's type
        if entry.get("level") == "SEVERE" and "favicon.ico" not in entry.get("message", "")
    ]
