"""The approvals page's pages and files (gateway/approvals_pages.py), rendered directly.

The Content-Security-Policy allows script and style from the page's own origin
only (no 'unsafe-inline', no hashes, no nonces), so a page carries no inline
script, style or event handler, and the style and script are package files that
must ship in the wheel. The pages over HTTP are test_approvals_web.py; in a real
browser, with no CSP violation, tests/integration/gateway/test_approvals_page_browser.py.
"""

from __future__ import annotations

import fnmatch
import re
import time
import tomllib
from pathlib import Path

from zerto_rewind.core.approvals import new_request
from zerto_rewind.core.sessions import SessionSummary, Timeline
from zerto_rewind.gateway import approvals_pages, sessions_page
from zerto_rewind.gateway.approvals_auth import Session
from zerto_rewind.gateway.approvals_login import Failure

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "zerto_rewind"
STATIC = PACKAGE / "gateway" / "static"


def every_page() -> dict[str, str]:
    """Each kind of page, with a pending and a decided request and a failed login."""
    now = time.time()
    session = Session(name="olivia", csrf="c" * 43, created=now, seen=now, flash=("ok", "done"))
    pending = new_request(
        tool="power_off_vm",
        tool_input={"vm": "web-01", "note": "<script>alert(1)</script>"},
        vms=["web-01"],
        row="vm_unknown",
        why="no VPG protects web-01.",
        principal="agent-1",
    )
    failures = [Failure(now, "olivia", "loopback", known_browser=False)]
    return {
        "login": approvals_pages.login_page("/", "Wrong name or password.", "olivia"),
        "list": approvals_pages.listing_page(session, [pending], [], failures, now),
        "request": approvals_pages.request_page(session, pending, [pending], [], now),
        "message": approvals_pages.message_page(session, "Not found", "no such request"),
        "not accepted": approvals_pages.not_accepted_page(None),
        "sessions": sessions_page.sessions_page(session, [SessionSummary("s-1")], "/l"),
        "session": sessions_page.session_page(session, Timeline("s-1", "", "", [])),
    }


def test_the_pages_carry_no_inline_script_or_style() -> None:
    pages = every_page()
    for page in pages.values():
        assert "<style" not in page
        assert not re.search(r"\sstyle=", page)
        assert not re.search(r"\son[a-z]+=", page)  # no onclick= and the like
        scripts = re.findall(r"<script([^>]*)>(.*?)</script>", page, flags=re.S)
        assert scripts == [(' src="/static/app.js" defer', "")]
        assert re.findall(r'<link rel="stylesheet" href="([^"]+)">', page) == ["/static/app.css"]
    for kind in ("list", "request"):  # the call's own script is text, escaped
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[kind]


def test_the_style_and_script_come_from_the_package_files() -> None:
    css = approvals_pages.stylesheet()
    assert css == (STATIC / "approvals.css").read_text(encoding="utf-8")
    assert "button.approve" in css  # the page's rules
    assert "tr.differs" in css  # and the request cards'
    js = approvals_pages.script()
    assert "@POLL_MS@" not in js
    assert f"var POLL_MS = {approvals_pages.POLL_MS};" in js
    source = (STATIC / "approvals.js").read_text(encoding="utf-8")
    assert js == source.replace("@POLL_MS@", str(approvals_pages.POLL_MS))


def test_the_wheel_carries_the_style_and_script() -> None:
    """Every file under gateway/static matches the package-data the build is told of."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["zerto_rewind"]
    assert sorted(path.name for path in STATIC.iterdir()) == ["approvals.css", "approvals.js"]
    for path in STATIC.iterdir():
        relative = path.relative_to(PACKAGE).as_posix()
        assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns), relative
