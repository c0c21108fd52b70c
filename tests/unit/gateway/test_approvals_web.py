"""The approvals page (gateway/approvals_web.py) over Starlette's TestClient.

A real ApprovalsService over a FileApprovalStore in a tmp dir: the page's login,
its CSRF and origin checks, what it shows (escaped), and what a decision records
in the store and the decision log. The same page in a real browser is
tests/integration/gateway/test_approvals_page_browser.py.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.core.approvals import ApprovalRequest, new_request
from zerto_rewind.gateway import approvals_auth, approvals_login, approvals_pages
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_web import (
    build_approvals_app,
    check_password,
    hash_password,
    safe_next,
)

PASSWORD = "correct horse"
# Hashed once: scrypt costs ~0.1 s a hash, on purpose.
OLIVIA = hash_password(PASSWORD)
AGENT = hash_password("agent-pw")


def stand_in_settings(tmp_path: Path) -> Any:
    """The attributes ApprovalsService reads, and nothing else."""
    return SimpleNamespace(
        approvals=ApprovalsSettings(
            web_approvers={"olivia": OLIVIA, "pat": OLIVIA, "agent-1": AGENT}
        ),
        gateway=SimpleNamespace(clients={"agent-1": "0" * 64}),
        state_url=None,
        state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"),
        log_path=str(tmp_path / "decisions.log"),
    )


@pytest.fixture
def service(tmp_path: Path) -> ApprovalsService:
    return ApprovalsService(stand_in_settings(tmp_path))


@pytest.fixture
def client(service: ApprovalsService) -> Iterator[TestClient]:
    with TestClient(
        build_approvals_app(service, secure_cookies=False), follow_redirects=False
    ) as test_client:
        yield test_client


def open_request(service: ApprovalsService, **changes: Any) -> ApprovalRequest:
    """A request as the MCP call path opens one: new_request, then store.open_request."""
    fields: dict[str, Any] = {
        "tool": "power_off_vm",
        "tool_input": {"vm": "web-01", "force": True},
        "vms": ["web-01"],
        "row": "vm_unknown",
        "why": "zerto-rewind: no VPG protects web-01.",
        "principal": "agent-1",
        "session": "sess-42",
        "host": "build-7",
        "vpg_status": ["vpg-web: failed (journal full)"],
    }
    fields.update(changes)
    request, created = service.store.open_request(new_request(**fields))
    assert created
    return request


def login(client: TestClient, name: str = "olivia", password: str = PASSWORD, **extra: str) -> Any:
    return client.post("/login", data={"name": name, "password": password, **extra})


def csrf_of(page_html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page_html)
    assert found, "no CSRF field on the page"
    return found.group(1)


def logged_in(client: TestClient) -> str:
    """Log in as olivia; the CSRF token of the session."""
    answer = login(client)
    assert answer.status_code == 303, answer.text
    return csrf_of(client.get("/").text)


def log_lines(service: ApprovalsService) -> list[dict[str, Any]]:
    path = Path(service.settings.log_path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------- passwords


def test_hash_format_and_check() -> None:
    parts = OLIVIA.split("$")
    assert OLIVIA.startswith("scrypt$16384$8$1$")
    assert OLIVIA.count("$") == 5
    assert len(parts) == 6
    assert check_password(PASSWORD, OLIVIA)
    assert not check_password("wrong", OLIVIA)
    assert hash_password(PASSWORD) != OLIVIA  # a fresh salt each time
    for bad in ("", "scrypt$", "md5$1$2$3$4$5", "scrypt$x$8$1$AA==$AA==", "scrypt$3$8$1$AA==$AA=="):
        assert not check_password(PASSWORD, bad)


# --------------------------------------------------------------------------- login


def test_login_required_everywhere(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    answer = client.get("/")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    answer = client.get(f"/requests/{request.id}")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/login?next=/requests/{request.id}"
    assert client.get("/api/pending").status_code == 401
    answer = client.post(f"/requests/{request.id}/approve", data={"csrf": "x"})
    assert answer.status_code == 403
    assert service.store.get(request.id).state == "pending"  # type: ignore[union-attr]
    page = client.get("/login")
    assert page.status_code == 200
    assert 'name="password"' in page.text


def test_wrong_password_and_unknown_name(client: TestClient) -> None:
    for name, password in (("olivia", "nope"), ("nobody", PASSWORD)):
        answer = login(client, name, password)
        assert answer.status_code == 401
        assert "Wrong name or password." in answer.text
        assert "set-cookie" not in answer.headers
    assert client.get("/").status_code == 303


def test_unknown_name_costs_a_scrypt_too(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    real = approvals_auth.check_password

    def counting(password: str, hashed: str) -> bool:
        checked.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(approvals_auth, "check_password", counting)
    login(client, "nobody", PASSWORD)
    assert len(checked) == 1
    assert checked[0].startswith("scrypt$16384$8$1$")  # the decoy, same parameters


def test_agent_token_name_cannot_log_in(client: TestClient) -> None:
    answer = login(client, "agent-1", "agent-pw")  # listed as an approver AND an agent token
    assert answer.status_code == 403
    assert "agent token" in answer.text
    assert "set-cookie" not in answer.headers
    assert client.get("/api/pending").status_code == 401


@pytest.mark.parametrize("secure", [False, True])
def test_cookie_flags(service: ApprovalsService, secure: bool) -> None:
    app = build_approvals_app(service, secure_cookies=secure)
    with TestClient(app, follow_redirects=False) as test_client:
        answer = login(test_client)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    attrs = [part.strip() for part in cookie.split(";")]
    assert attrs[0].startswith("zr_session=")
    assert len(attrs[0]) > len("zr_session=") + 40  # token_urlsafe(32)
    assert "HttpOnly" in attrs
    assert "SameSite=Strict" in attrs
    assert "Path=/" in attrs
    assert ("Secure" in attrs) is secure
    assert ("strict-transport-security" in answer.headers) is secure  # TLS: HSTS too


def test_wrong_passwords_slow_a_name_but_never_keep_out_the_right_one(
    client: TestClient, service: ApprovalsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the free failures each try of the name waits its turn; the right one gets in."""
    monkeypatch.setattr(approvals_login, "MAX_DELAY_S", 0.3)  # the spacing, kept short here
    for _ in range(8):
        assert login(client, "olivia", "bad").status_code == 401
    started = time.monotonic()
    answer = login(client, "olivia", PASSWORD)  # what refused it with 429 before
    assert answer.status_code == 303
    assert 0.25 <= time.monotonic() - started < 5  # held for its turn, not refused
    # The approver sees the failures, and the agent's guesses are never a lock.
    listing = client.get("/").text
    assert 'id="failed-logins"' in listing
    assert "8 failed approver login(s)" in listing
    assert "olivia" in listing
    assert "testclient" in listing  # the source: Starlette's TestClient's address


def test_a_known_browser_is_not_slowed_by_failures_elsewhere(service: ApprovalsService) -> None:
    """The approver's browser logged in before: another client's failures do not delay it."""
    app = build_approvals_app(service, secure_cookies=False)
    with (
        TestClient(app, follow_redirects=False) as browser,
        TestClient(app, follow_redirects=False) as agent,
    ):
        logged_in(browser)
        assert browser.cookies.get(approvals_login.KNOWN_COOKIE)
        for _ in range(7):
            assert login(agent, "olivia", "guess").status_code == 401
        # The agent's own next try waits (1, 2, then 4 s apart): slowed.
        started = time.monotonic()
        assert login(agent, "olivia", "guess").status_code == 401
        assert time.monotonic() - started >= 3.5
        # Same name, same source address; the known browser's try is not held at all.
        started = time.monotonic()
        assert login(browser).status_code == 303
        assert time.monotonic() - started < 1.0
        listing = browser.get("/").text
        assert "8 failed approver login(s)" in listing


def test_the_failed_logins_banner_escapes_what_was_typed(client: TestClient) -> None:
    assert login(client, "<b>x</b>", "bad").status_code == 401
    logged_in(client)
    listing = client.get("/").text
    assert "&lt;b&gt;x&lt;/b&gt;" in listing
    assert "<b>x</b>" not in listing


def test_session_expires_after_8h_idle(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(approvals_auth, "_now", lambda: clock[0])
    logged_in(client)
    clock[0] += 7 * 3600
    assert client.get("/").status_code == 200  # activity: the idle clock restarts
    clock[0] += 7 * 3600
    assert client.get("/").status_code == 200
    clock[0] += 8 * 3600 + 1
    assert client.get("/").status_code == 303


def test_logout_ends_the_session(client: TestClient) -> None:
    csrf = logged_in(client)
    old = client.cookies.get("zr_session")
    assert client.post("/logout", data={}).status_code == 403  # needs the CSRF token too
    answer = client.post("/logout", data={"csrf": csrf})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login"
    assert "Max-Age=0" in answer.headers["set-cookie"]
    client.cookies.set("zr_session", old or "")
    assert client.get("/").status_code == 303  # the old id is gone server-side


# --------------------------------------------------------------------------- decisions


def test_post_without_csrf_is_refused(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    logged_in(client)
    for data in ({}, {"csrf": "forged"}, {"csrf": ""}):
        answer = client.post(f"/requests/{request.id}/approve", data=data)
        assert answer.status_code == 403
        assert "Nothing was changed" in answer.text
    assert service.store.get(request.id).state == "pending"  # type: ignore[union-attr]
    assert [r for r in log_lines(service) if r.get("answer") == "approved"] == []


def test_post_from_a_foreign_origin_is_refused(
    client: TestClient, service: ApprovalsService
) -> None:
    request = open_request(service)
    csrf = logged_in(client)
    for origin in ("http://evil.example", "null", "http://testserver:8080"):
        answer = client.post(
            f"/requests/{request.id}/approve", data={"csrf": csrf}, headers={"origin": origin}
        )
        assert answer.status_code == 403, origin
    for headers in (
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"origin": "null", "sec-fetch-site": "cross-site"},
        {"origin": "http://evil.example", "sec-fetch-site": "same-origin"},
    ):
        answer = client.post(
            f"/requests/{request.id}/approve", data={"csrf": csrf}, headers=headers
        )
        assert answer.status_code == 403, headers
    assert service.store.get(request.id).state == "pending"  # type: ignore[union-attr]
    answer = client.post(
        f"/requests/{request.id}/approve",
        data={"csrf": csrf},
        headers={"origin": "http://testserver"},
    )
    assert answer.status_code == 303


def test_origin_null_from_the_page_itself_is_accepted(
    client: TestClient, service: ApprovalsService
) -> None:
    """Under Referrer-Policy: no-referrer a browser posts its own form with Origin: null."""
    request = open_request(service)
    csrf = logged_in(client)
    answer = client.post(
        f"/requests/{request.id}/approve",
        data={"csrf": csrf},
        headers={"origin": "null", "sec-fetch-site": "same-origin"},
    )
    assert answer.status_code == 303
    assert service.store.get(request.id).state == "approved"  # type: ignore[union-attr]


def test_approve_records_the_approver(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    csrf = logged_in(client)
    answer = client.post(f"/requests/{request.id}/approve", data={"csrf": csrf, "next": "/"})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/"
    stored = service.store.get(request.id)
    assert stored is not None
    assert stored.state == "approved"
    assert stored.decided_by == "web:olivia"
    lines = [r for r in log_lines(service) if r.get("approval_id") == request.id]
    assert [(r["answer"], r["approver"]) for r in lines] == [("approved", "web:olivia")]
    page = client.get("/").text
    assert f"Approved {request.id}: power_off_vm on web-01." in page
    assert "Nothing is waiting for a decision." in page
    assert 'class="recent"' in page
    assert "web:olivia" in page


def test_deny_with_a_reason_and_back_to_the_request_page(
    client: TestClient, service: ApprovalsService
) -> None:
    request = open_request(service)
    csrf = logged_in(client)
    back = f"/requests/{request.id}"
    answer = client.post(
        f"/requests/{request.id}/deny",
        data={"csrf": csrf, "note": "  not during business hours ", "next": back},
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == back
    stored = service.store.get(request.id)
    assert stored is not None
    assert (stored.state, stored.decided_by, stored.note) == (
        "denied",
        "web:olivia",
        "not during business hours",
    )
    page = client.get(back).text
    assert "not during business hours" in page
    assert 'data-state="denied"' in page
    assert "Approve</button>" not in page  # a decided request has no buttons


def test_expired_or_decided_request_shows_a_message(
    client: TestClient, service: ApprovalsService
) -> None:
    expired = open_request(service, now=time.time() - 1000, expires_s=10)
    decided = open_request(service, tool="delete_vm")
    service.store.decide(decided.id, False, "unix:root", "no")
    csrf = logged_in(client)
    answer = client.post(f"/requests/{expired.id}/approve", data={"csrf": csrf})
    assert answer.status_code == 409
    assert "expired, not pending" in answer.text
    answer = client.post(f"/requests/{decided.id}/approve", data={"csrf": csrf})
    assert answer.status_code == 409
    assert "denied, not pending" in answer.text
    assert service.store.get(expired.id).decided_by is None  # type: ignore[union-attr]
    now = service.store.get(decided.id)
    assert now is not None
    assert (now.state, now.decided_by) == ("denied", "unix:root")
    assert client.post("/requests/ZZZZ-ZZZZ/approve", data={"csrf": csrf}).status_code == 404


def test_an_approver_cannot_approve_their_own_request(
    client: TestClient, service: ApprovalsService
) -> None:
    request = open_request(service, principal="olivia")
    csrf = logged_in(client)
    answer = client.post(f"/requests/{request.id}/approve", data={"csrf": csrf})
    assert answer.status_code == 403
    assert "made this request" in answer.text
    assert service.store.get(request.id).state == "pending"  # type: ignore[union-attr]
    assert [r["answer"] for r in log_lines(service)] == ["refused"]


def test_form_must_be_urlencoded(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    csrf = logged_in(client)
    answer = client.post(f"/requests/{request.id}/approve", json={"csrf": csrf})
    assert answer.status_code == 415
    assert service.store.get(request.id).state == "pending"  # type: ignore[union-attr]


# --------------------------------------------------------------------------- what it shows


def test_page_shows_what_a_person_needs(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    other = open_request(
        service, tool="run_script", tool_input={"script": "x"}, vms=[], row="no_vm"
    )
    logged_in(client)
    page = client.get("/").text
    for shown in (
        request.id,
        "power_off_vm",
        "web-01",
        "VM unknown to Zerto",
        "no VPG protects web-01.",
        "vpg-web: failed (journal full)",
        "agent-1",
        "build-7",
        "sess-42",
        '<th>force</th><td class="mono value">true</td>',  # the value, not its shape
        "Runs once, with no rewind point",
        "Caller",
        "Signed in as <b>olivia</b>",
        "Approve</button>",
        'name="note"',
        "no VM in the arguments",
        other.id,
    ):
        assert shown in page, shown
    assert page.index(request.id) < page.index(other.id)  # oldest first
    assert re.search(r"<time [^>]*data-ts=", page)
    own = client.get(f"/requests/{request.id}")
    assert own.status_code == 200
    assert request.id in own.text
    assert other.id not in own.text
    assert client.get("/requests/ZZZZ-ZZZZ").status_code == 404
    assert client.get("/requests/..%2Fetc").status_code == 404


def test_markup_in_request_fields_is_escaped(client: TestClient, service: ApprovalsService) -> None:
    evil = "<script>alert(1)</script>"
    request = open_request(
        service,
        tool=f"t{evil}",
        tool_input={f"k{evil}": "<b>vm</b>"},
        vms=["<b>vm</b>"],
        why=f'why "{evil}" <img src=x onerror=alert(2)>',
        principal=f"p{evil}",
        host=f"h{evil}",
        session=f"s{evil}",
        vpg_status=[f"v{evil}"],
        row=f"r{evil}",
    )
    service.store.decide(
        open_request(service, tool="other").id, False, f"unix:{evil}", f"note {evil}"
    )
    csrf = logged_in(client)
    for path in ("/", f"/requests/{request.id}"):
        page = client.get(path).text
        assert "<script>alert" not in page
        assert "<img src=x" not in page
        assert "<b>vm</b>" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "&lt;b&gt;vm&lt;/b&gt;" in page
        # the only <script> is the page's own file
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/app.js" defer>']
    assert csrf


def test_next_stays_on_this_site(client: TestClient, service: ApprovalsService) -> None:
    request = open_request(service)
    for bad in (
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "/requests/../../x",
        "javascript:alert(1)",
        "/api/pending",
        "",
    ):
        assert safe_next(bad) == "/", bad
        answer = login(client, next=bad)
        assert answer.status_code == 303
        assert answer.headers["location"] == "/", bad
    target = f"/requests/{request.id}"
    assert login(client, next=target).headers["location"] == target
    page = client.get("/login?next=https://evil.example/").text
    assert "evil.example" not in page


def test_login_then_back_to_the_request(service: ApprovalsService) -> None:
    request = open_request(service)
    app = build_approvals_app(service, secure_cookies=False)
    with TestClient(app) as test_client:  # follows redirects, as a browser does
        first = test_client.get(f"/requests/{request.id}")
        assert first.url.path == "/login"
        assert f'name="next" value="/requests/{request.id}"' in first.text
        landed = test_client.post(
            "/login",
            data={"name": "olivia", "password": PASSWORD, "next": f"/requests/{request.id}"},
        )
        assert landed.url.path == f"/requests/{request.id}"
        assert "Approve</button>" in landed.text


def test_api_pending(client: TestClient, service: ApprovalsService) -> None:
    first = open_request(service)
    second = open_request(service, tool="delete_vm")
    csrf = logged_in(client)
    data = client.get("/api/pending").json()
    assert [r["id"] for r in data["pending"]] == [first.id, second.id]
    assert data["pending"][0]["tool"] == "power_off_vm"
    assert data["pending"][0]["vms"] == ["web-01"]
    assert data["pending"][0]["url"] == f"/requests/{first.id}"
    assert data["recent"] == []
    version = data["version"]
    client.post(f"/requests/{second.id}/deny", data={"csrf": csrf, "note": "no"})
    data = client.get("/api/pending").json()
    assert [r["id"] for r in data["pending"]] == [first.id]
    assert [(r["id"], r["state"], r["decided_by"], r["note"]) for r in data["recent"]] == [
        (second.id, "denied", "web:olivia", "no")
    ]
    assert data["version"] != version


def test_security_headers_everywhere(client: TestClient) -> None:
    logged_in(client)
    for path in ("/", "/login", "/api/pending", "/static/app.js", "/static/app.css", "/nope"):
        headers = client.get(path).headers
        csp = headers["content-security-policy"]
        assert "default-src 'none'" in csp
        assert "script-src 'self'" in csp
        assert "unsafe-inline" not in csp
        assert "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY"
        assert headers["referrer-policy"] == "no-referrer"
        assert headers["cache-control"] == "no-store"
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")


def test_the_style_and_script_are_served_from_the_package_files(client: TestClient) -> None:
    css = client.get("/static/app.css")
    assert css.headers["content-type"].startswith("text/css")
    assert css.text == approvals_pages.stylesheet()
    assert client.get("/static/app.js").text == approvals_pages.script()


def test_served_under_a_prefix(service: ApprovalsService) -> None:
    """Mounted under /approvals (a proxy's prefix, ASGI root_path): every link keeps it."""
    request = open_request(service)
    outer = Starlette(
        routes=[Mount("/approvals", app=build_approvals_app(service, secure_cookies=False))]
    )
    with TestClient(outer, follow_redirects=False) as test_client:
        answer = test_client.get(f"/approvals/requests/{request.id}")
        assert answer.headers["location"] == f"/approvals/login?next=/requests/{request.id}"
        answer = test_client.post(
            "/approvals/login",
            data={"name": "olivia", "password": PASSWORD, "next": f"/requests/{request.id}"},
        )
        assert answer.headers["location"] == f"/approvals/requests/{request.id}"
        page = test_client.get(f"/approvals/requests/{request.id}").text
        assert '<script src="/approvals/static/app.js" defer>' in page
        assert f'action="/approvals/requests/{request.id}/approve"' in page
        assert 'data-base="/approvals"' in page
        answer = test_client.post(
            f"/approvals/requests/{request.id}/approve",
            data={"csrf": csrf_of(page), "next": f"/requests/{request.id}"},
        )
        assert answer.headers["location"] == f"/approvals/requests/{request.id}"
        assert test_client.get("/approvals/api/pending").json()["recent"][0]["url"] == (
            f"/approvals/requests/{request.id}"
        )
    assert service.store.get(request.id).state == "approved"  # type: ignore[union-attr]


def test_the_page_shows_bidi_and_escapes_as_visible_text(
    client: TestClient, service: ApprovalsService
) -> None:
    """A value, a key, a VM name and a reason with bidi and ESC reach the page only as text."""
    request = open_request(
        service,
        tool="upload\u202e",
        tool_input={"name\x1b[31m": "report-\u202egol.hs", "note": "a\u200bb\rc"},
        vms=["w\u0435b-01"],
        why="why \u2066hidden\u2069",
    )
    logged_in(client)
    for path in ("/", f"/requests/{request.id}"):
        page = client.get(path).text
        for raw in ("\u202e", "\u2066", "\u2069", "\u200b", "\x1b", "\r"):
            assert raw not in page, repr(raw)
        assert "&quot;report-&lt;U+202E&gt;gol.hs&quot;" in page
        assert "name\\x1b[31m" in page
        assert "&quot;a&lt;U+200B&gt;b\\rc&quot;" in page
        assert "not plain ASCII: &lt;U+0435&gt;" in page  # the look-alike VM name flagged


def test_a_long_value_has_head_tail_and_the_whole_value_one_click_away(
    client: TestClient, service: ApprovalsService
) -> None:
    padded = "/var/tmp/ok/" + "./" * 400 + "../../../etc/cron.d/x"
    request = open_request(
        service,
        tool="download",
        tool_input={"save_to": padded},
        row="host_path",
        vms=[],
        host_paths={"save_to": padded},
    )
    logged_in(client)
    page = client.get(f"/requests/{request.id}").text
    assert "characters not shown" in page
    assert f"<pre>&quot;{padded}&quot;</pre>" in page  # the whole value, in <details>
    assert "resolves to /etc/cron.d/x" in page
    assert "It may write these paths on the VM server&#x27;s host: /etc/cron.d/x" in page


def test_two_calls_that_differ_in_one_value_are_marked(
    client: TestClient, service: ApprovalsService
) -> None:
    scratch = open_request(service, tool_input={"vm": "web-01", "file": "scratch.txt"})
    disk = open_request(service, tool_input={"vm": "web-01", "file": "web-01.vmdk"})
    logged_in(client)
    page = client.get("/").text
    for request in (scratch, disk):
        card = page.split(f'id="req-{request.id}"')[1].split("</article>")[0]
        assert 'tr class="differs" data-path="file"' in card
        assert 'data-path="vm"><th>vm</th>' in card  # the same in both: not marked
        assert request.args_digest[:12] in card
    assert scratch.args_digest != disk.args_digest


def test_a_decided_request_shows_who_and_when_not_an_expiry(
    client: TestClient, service: ApprovalsService
) -> None:
    request = open_request(service)
    service.store.decide(request.id, True, "unix:pat")
    logged_in(client)
    page = client.get(f"/requests/{request.id}").text
    assert "<dt>Approved</dt>" in page
    assert "by unix:pat," in page
    assert "Expires" not in page
    assert "Open until" not in page
