"""The approvals page's rewind: the plan and the run as drawn (escaping hostile names), one
run at a time per plan, and the routes' refusals that need no ZVM."""

from __future__ import annotations

import threading
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from starlette.testclient import TestClient

from zerto_rewind.config.settings import ApprovalsSettings
from zerto_rewind.gateway.approvals import ApprovalsService
from zerto_rewind.gateway.approvals_auth import Session
from zerto_rewind.gateway.approvals_pages import safe_next
from zerto_rewind.gateway.approvals_web import build_approvals_app, hash_password
from zerto_rewind.gateway.rewind_page import plan_page, run_json, run_page
from zerto_rewind.gateway.rewind_runs import PageRun, PageRuns, Step
from zerto_rewind.recovery import rewind_run
from zerto_rewind.recovery.rewind_build import LoggedChange, RewindPlan, VmRewind
from zerto_rewind.recovery.rewind_run import RunReport, VmResult

PASSWORD = "correct horse"
# A VM name an agent could choose: markup, an attribute break-out, ESC, a bidi override
# that would show "exe.png" as "gnp.exe", a zero-width space.
EVIL = 'evil"><script>alert(1)</script>\x1b[31m\u202egnp.exe\u200b'
RAW = ("<script>alert", "\x1b", "\u202e", "\u200b", 'evil"')
SHOWN = ("&lt;script&gt;alert(1)&lt;/script&gt;", "\\x1b[31m", "&lt;U+202E&gt;")


class _Tags(HTMLParser):
    """Every element the browser would make, and every attribute it would read."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs


def parsed(html: str) -> _Tags:
    tags = _Tags()
    tags.feed(html)
    return tags


def change(vms: list[str], session: str | None = "s1", tool: str = EVIL) -> LoggedChange:
    return LoggedChange(time="2026-12-03T10:00:00.000Z", session_id=session, tool=tool,
                        vms=vms, decision="context")  # fmt: skip


def hostile_plan() -> RewindPlan:
    vm = VmRewind(
        vm=EVIL, vm_id="vm-1", vpg=f"vpg {EVIL}", vpg_id="vpg-1", checkpoint_id="cp-1",
        checkpoint_tag=f"zr {EVIL}", checkpoint_time="2026-12-03T09:59:59.000Z",
        in_journal=True, first_change=change([EVIL]), changes=2,
        operation="journal VM restore, then commit", zerto_api=["POST /v1/vms/vm-1/Restore"],
        failover_touches=[f"other {EVIL}"], also_undoes=[change([EVIL], session=EVIL)],
        later_checkpoints=[f"cp-2 ({EVIL})"], blocked=f"blocked {EVIL}",
    )  # fmt: skip
    return RewindPlan(
        plan_id="0123456789abcdef", created_at="2026-12-03T10:01:00.000Z",
        scope={"session_id": EVIL}, vms=[vm], cannot_rewind=[change([], tool=EVIL)],
        facts={f"vm {EVIL}": f"log {EVIL}"},
    )  # fmt: skip


def session() -> Session:
    return Session(name="olivia", csrf="csrf-token", created=0.0, seen=0.0)


def assert_escaped(html: str) -> None:
    for raw in RAW:
        assert raw not in html, raw
    for shown in SHOWN:
        assert shown in html, shown
    tags = parsed(html)
    assert tags.tags.count("script") == 1  # the page's own /static/app.js, nothing else
    assert not [name for name, _ in tags.attrs if name.startswith("on") or name == "style"]


def test_the_plan_is_drawn_in_full_with_every_hostile_name_escaped() -> None:
    """VM, VPG, tags, tools, sessions, facts: shown, as visible text, never as markup."""
    html = plan_page(session(), hostile_plan(), {}, None)
    assert_escaped(html)
    assert 'id="plan-id">0123456789abcdef<' in html
    for part in ("cp-1", "in the journal", "journal VM restore, then commit", "Cannot run:",
                 "Cannot be rewound", "Also undoes", "POST /v1/vms/vm-1/Restore"):  # fmt: skip
        assert part in html, part
    tags = parsed(html)
    values = dict(a for a in tags.attrs if a[0] in ("name", "value") and a[1] == "csrf-token")
    assert values, "the start form carries the page's CSRF token"
    assert ("name", "confirm-0") in tags.attrs  # a box to type the VPG's name for a failover
    assert ("value", "0123456789abcdef") in tags.attrs


def test_the_run_and_its_report_are_escaped_and_offer_a_resume() -> None:
    """Progress per VM, the report's why, an error: escaped; a VM not done: a resume form."""
    report = RunReport("0123456789abcdef", "restore")
    report.results = [VmResult(EVIL, "failed", "untouched", f"task failed: {EVIL}")]
    run = PageRun("0123456789abcdef", "restore", f"web:{EVIL}", False, 0.0, state="finished",
                  steps={EVIL: Step(EVIL, "commit", 40)}, report=report)  # fmt: skip
    earlier = {"restore": {EVIL: {"state": "failed", "why": EVIL}}}
    html = run_page(session(), "0123456789abcdef", run, hostile_plan(), earlier)
    assert_escaped(html)
    assert 'id="rewind-resume-restore"' in html
    assert 'data-active="0"' in html
    assert "Not every VM is done" in html
    assert run_json(run)["report"]["results"][0]["vm"] == EVIL  # JSON, never put into HTML


def test_a_refused_run_names_why_and_links_to_a_new_plan() -> None:
    """Refused (the plan moved): the reason shown, a link to build the plan again."""
    run = PageRun("0123456789abcdef", "restore", "web:olivia", False, 0.0, state="refused",
                  error=f"plan refused: since the dry run, {EVIL}: log")  # fmt: skip
    html = run_page(session(), "0123456789abcdef", run, hostile_plan(), {})
    assert_escaped(html)
    assert "Refused: nothing was run." in html
    assert 'id="plan-again"' in html


def test_a_second_start_of_a_running_plan_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """One run at a time per plan; once it ended, the plan may be started again."""
    release, calls = threading.Event(), []

    def run_plan(*args: Any, **kwargs: Any) -> RunReport:
        calls.append(kwargs["approver"])
        kwargs["started"](["vm-1"])
        assert release.wait(10)
        return RunReport("0123456789abcdef", kwargs["mode"])

    monkeypatch.setattr(rewind_run, "run_plan", run_plan)
    runs = PageRuns(SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]
    plan = hostile_plan()
    assert runs.start(plan, "restore", "web:olivia", frozenset(), resume=False) is None
    refused = runs.start(plan, "test", "web:paul", frozenset(), resume=False)
    assert refused is not None
    assert "already being run (restore, started by web:olivia)" in refused
    release.set()
    for _ in range(200):
        found = runs.get(plan.plan_id)
        if found is not None and not found.active:
            break
        threading.Event().wait(0.02)
    assert found is not None
    assert found.state == "finished"
    assert runs.start(plan, "restore", "web:olivia", frozenset(), resume=True) is None
    assert calls[:1] == ["web:olivia"]


def test_without_the_guards_zvms_the_page_runs_no_rewind(tmp_path: Path) -> None:
    """A page built without ZVMs: an approver is told to use the CLI; nothing is built."""
    settings: Any = SimpleNamespace(
        approvals=ApprovalsSettings(web_approvers={"olivia": hash_password(PASSWORD)}),
        gateway=SimpleNamespace(clients={}), state_url=None, state_connection_url=lambda: None,
        state_dir=str(tmp_path / "state"), log_path=str(tmp_path / "decisions.log"),
    )  # fmt: skip
    app = build_approvals_app(ApprovalsService(settings), secure_cookies=False)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        client.post("/login", data={"name": "olivia", "password": PASSWORD})
        shown = client.get("/rewind/session/s1")
        assert shown.status_code == 503
        assert "zerto-rewind rewind --plan ID" in shown.text
    assert not (tmp_path / "state" / "rewind").exists()


def test_after_login_the_rewind_pages_are_where_a_person_goes_back() -> None:
    """``next`` may be a session's plan or a plan's run; never anything else."""
    assert safe_next("/rewind/session/s1") == "/rewind/session/s1"
    assert safe_next("/rewinds/0123456789abcdef") == "/rewinds/0123456789abcdef"
    assert safe_next("/rewinds/../../etc") == "/"
    assert safe_next("//evil.test/rewinds/0123456789abcdef") == "/"
