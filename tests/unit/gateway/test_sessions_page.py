"""The approvals page's sessions view: the SVG timeline, its escaping, and its routes."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote
from xml.etree import ElementTree

import pytest
from starlette.testclient import TestClient

from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.core.decisions_log import write_record
from zerto_rewind.core.sessions import read_timeline
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_auth import Session
from zerto_rewind.gateway.approvals_web import build_approvals_app, hash_password
from zerto_rewind.gateway.sessions_page import session_page, sessions_page, timeline_svg

PASSWORD = "correct horse"


def stand_in_settings(tmp_path: Path) -> Any:
    """The attributes ApprovalsService and the sessions view read, and nothing else."""
    return SimpleNamespace(
        approvals=ApprovalsSettings(web_approvers={"olivia": hash_password(PASSWORD)}),
        gateway=SimpleNamespace(clients={}),
        state_url=None,
        state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"),
        log_path=str(tmp_path / "decisions.log"),
    )


def login(client: TestClient, **extra: str) -> Any:
    return client.post("/login", data={"name": "olivia", "password": PASSWORD, **extra})


SVG = "{http://www.w3.org/2000/svg}"
EVIL_VM = 'evil"><script>alert(1)</script>\x1b[31m'


def _write(path: Path, session: str, second: int, **fields: Any) -> None:
    record = {
        "time": f"2026-12-01T08:00:{second:02d}.000Z",
        "session_id": session,
        "origin": "service",
        "tool": "power_off_vm",
        "row": "confirmed",
        "decision": "context",
        "vms": ["web-01"],
        "client": "token:agent-1",
        **fields,
    }
    write_record(str(path), record)


def _log(path: Path) -> Path:
    _write(path, "sess-1", 10, checkpoint_ids=["77"], tags=["zr t1"],
           landed_at="2026-12-01T08:00:08.000Z")  # fmt: skip
    _write(path, "sess-1", 20, vms=[EVIL_VM], decision="deny", row="vm_unknown")
    _write(path, "sess-1", 30, vms=["db-01", "web-01"], tool="<b>snap</b>")
    _write(path, "sess-1", 35, vms=[], decision="prompt", row="no_vm", answer="approved",
           approver="olivia")  # fmt: skip
    _write(path, "sess-2", 40, vms=["web-01"], tool="reconfigure_vm")
    _write(path, "a/b#c", 45, vms=["app-01"])
    return path


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return _log(tmp_path / "decisions.log")


def _svg(log: Path) -> ElementTree.Element:
    svg = timeline_svg(read_timeline(str(log), "sess-1"))
    return ElementTree.fromstring(svg)  # noqa: S314  # our own SVG, parsed to check it


def test_a_lane_per_vm_in_first_named_order(log: Path) -> None:
    lanes = _svg(log).findall(f"{SVG}g[@class='lane']")
    assert [lane.get("data-vm") for lane in lanes] == [
        "web-01",
        'evil"><script>alert(1)</script>\\x1b[31m',  # visible escape, then XML-escaped
        "db-01",
        "(no VM named)",
    ]


def test_marks_are_ordered_on_one_time_axis(log: Path) -> None:
    svg = _svg(log)
    changes = svg.findall(f"{SVG}circle[@class='mark change']")
    xs = [float(c.get("cx") or 0) for c in changes]
    # web-01 at :10; db-01 and web-01 at :30 (one call, two lanes); no VM at :35
    assert xs[0] < xs[1] == xs[2] < xs[3]
    ys = {float(c.get("cy") or 0) for c in changes[1:3]}
    assert len(ys) == 2  # the two-VM call is on both lanes
    (denied,) = svg.findall(f"{SVG}path[@class='mark denied']")
    assert "denied" in (denied.findtext(f"{SVG}title") or "")
    (checkpoint,) = svg.findall(f"{SVG}path[@class='mark checkpoint']")
    title = checkpoint.findtext(f"{SVG}title") or ""
    assert title == "checkpoint 77 (zr t1), landed 2026-12-01 08:00:08"
    # the checkpoint landed before the change it protects: left of it on the axis
    assert float((checkpoint.get("d") or "M0,").split(",")[0][1:]) < xs[0]
    (other,) = svg.findall(f"{SVG}path[@class='mark other']")  # drawn once, not per change
    assert "by session sess-2: reconfigure_vm" in (other.findtext(f"{SVG}title") or "")
    labels = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "tick-label"]
    assert labels[0] == "2026-12-01 08:00:08"
    assert labels[-1] == "08:00:40"


def test_everything_the_log_holds_is_escaped(log: Path) -> None:
    now = time.time()
    session = Session(name="olivia", csrf="c" * 43, created=now, seen=now)
    page = session_page(session, read_timeline(str(log), "sess-1"))
    assert "<script>alert" not in page
    assert "<b>snap" not in page
    assert "&lt;b&gt;snap&lt;/b&gt;" in page
    assert "\x1b" not in page
    assert "\\x1b[31m" in page
    assert "no rewind point, approved by olivia" in page
    assert not re.search(r"\sstyle=|<style|\son[a-z]+=", page)
    listing = sessions_page(session, [], str(log))
    assert "No agent sessions in" in listing


# --------------------------------------------------------------------------- routes


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = stand_in_settings(tmp_path)
    _log(Path(settings.log_path))
    app = build_approvals_app(ApprovalsService(settings), secure_cookies=False)
    with TestClient(app, follow_redirects=False) as test_client:
        yield test_client


def test_routes_need_a_login_and_come_back_after_it(client: TestClient) -> None:
    answer = client.get("/sessions/sess-1")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/sessions/sess-1"
    assert login(client, next="/sessions/sess-1").headers["location"] == "/sessions/sess-1"


def test_list_then_one_session(client: TestClient) -> None:
    login(client)
    listing = client.get("/sessions")
    assert listing.status_code == 200
    assert listing.text.index("sess-2") < listing.text.index("sess-1")  # latest first
    assert 'href="/sessions/sess-1"' in listing.text
    shown = client.get("/sessions/sess-1")
    assert shown.status_code == 200
    assert '<svg class="timeline"' in shown.text
    assert "default-src 'none'" in shown.headers["content-security-policy"]
    assert client.get("/sessions/sess-").status_code == 404  # ambiguous: several ids
    slashed = client.get("/sessions/" + quote("a/b#c", safe=""))
    assert slashed.status_code == 200
    assert "a/b#c" in slashed.text
    missing = client.get("/sessions/nope")
    assert missing.status_code == 404
    assert "zerto-rewind sessions" in missing.text
