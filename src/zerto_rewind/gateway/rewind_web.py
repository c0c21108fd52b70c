"""The approvals page's rewind routes: open a session's plan, start it, follow it.

- ``GET /rewind/session/<id>``: the session's plan, built now (as ``rewind --session
  ID --dry-run``: saved under its id, nothing changed), and the form that runs it;
- ``POST /rewind/start``: runs a saved plan (``plan``, ``mode``, for ``failover``
  each VPG's name typed, ``resume``), in the background (``rewind_runs``);
- ``GET /rewinds/<plan id>``: the run's progress and report; ``GET
  /api/rewinds/<plan id>``: the same as JSON, which the page's script polls.

Who: a page login (never an agent's bearer token: the page reads none) whose name
may approve (:meth:`ApprovalsService.refusal`, the rules of approving, asked again
at every request). A POST also needs the page's CSRF token and its own origin
(``approvals_auth.PageAuth.checked``); anything else is refused before the plan is
read, and nothing runs. The run is the CLI's (``recovery.rewind_run.run_plan``):
the plan is rebuilt and compared first, each step is a decision-log line naming
the approver (``web:NAME``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..errors import StateError, UsageError, ZertoRewindError
from .approvals_auth import PageAuth, Session, approver
from .approvals_pages import message_page
from .rewind_page import plan_page, rewind_path, run_json, run_page
from .rewind_runs import MODES, PageRuns

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..core.guard import Guard
    from ..recovery.rewind_build import RewindPlan
    from ..recovery.rewind_run import Mode
    from ..zvm.client import ZvmClient
    from .approvals import ApprovalsService
    from .rewind_page import Earlier

__all__ = ["PageKit", "RewindRoutes"]

log = logging.getLogger("zerto_rewind.gateway")

_NOT_SERVED = (
    "This gateway's page does not run rewinds (it was started without the guard's ZVMs). "
    "Run it from the CLI as an approver: zerto-rewind rewind --plan ID"
)


@dataclass(frozen=True)
class PageKit:
    """The page's own HTTP plumbing, handed over by ``approvals_web`` (which imports this
    module; this one does not import it back)."""

    # A state-changing POST's session and form, or the answer refusing it (too large, not
    # urlencoded, no session, a wrong CSRF token or origin…).
    posted: Callable[[Request], Awaitable[tuple[Session, dict[str, str]] | Response]]
    go: Callable[[str], Response]  # 303 to an app-local path
    to_login: Callable[[Request], Response]  # to the login, coming back here


def _message(session: Session | None, title: str, text: str, status: int) -> HTMLResponse:
    """A page saying why nothing was done."""
    return HTMLResponse(message_page(session, title, text), status_code=status)


class RewindRoutes:
    """The rewind pages, over the page's logins and the gateway's ZVMs (None: not served)."""

    def __init__(
        self,
        service: ApprovalsService,
        auth: PageAuth,
        kit: PageKit,
        zvms: Guard | ZvmClient | None,
    ) -> None:
        self.service = service
        self.auth = auth
        self.kit = kit
        self.runs = PageRuns(service.settings, zvms) if zvms is not None else None

    def routes(self) -> list[Route]:
        return [
            Route("/rewind/session/{session_id:path}", self.plan, methods=["GET"]),
            Route("/rewind/start", self.start, methods=["POST"]),
            Route("/rewinds/{plan_id}", self.run, methods=["GET"]),
            Route("/api/rewinds/{plan_id}", self.api_run, methods=["GET"]),
        ]

    @property
    def settings(self) -> Settings:
        return self.service.settings

    def _refusal(self, session: Session) -> str | None:
        """Why this login may not run a rewind (asked now: the rules of approving)."""
        refused = self.service.refusal(approver(session.name), None)
        if refused is None:
            return None
        return f"{refused}: a rewind is run by an approver, never by an agent. Nothing was changed."

    async def _viewer(self, request: Request) -> Session | Response:
        """The approver asking, or the answer that sends anyone else away."""
        _, session = self.auth.current(request)
        if session is None:
            return self.kit.to_login(request)
        refused = self._refusal(session)
        if refused is not None:
            return _message(session, "Not an approver", refused, 403)
        if self.runs is None:
            return _message(session, "Rewinds not served here", _NOT_SERVED, 503)
        return session

    # ------------------------------------------------------------------ pages

    async def plan(self, request: Request) -> Response:
        """The session's plan, built now and saved (as ``--dry-run``), and its start form."""
        session = await self._viewer(request)
        if isinstance(session, Response):
            return session
        found = await self._read_plan(session, self._build, request.path_params["session_id"])
        if isinstance(found, Response):
            return found
        plan, earlier = found
        runs = cast("PageRuns", self.runs)
        return HTMLResponse(plan_page(session, plan, earlier, runs.get(plan.plan_id)))

    async def run(self, request: Request) -> Response:
        """A plan's run: progress, then the report; a resume where a VM is not done."""
        session = await self._viewer(request)
        if isinstance(session, Response):
            return session
        plan_id = request.path_params["plan_id"]
        found = await self._read_plan(session, self._load, plan_id)
        if isinstance(found, Response):
            return found
        runs = cast("PageRuns", self.runs)
        return HTMLResponse(run_page(session, plan_id, runs.get(plan_id), *found))

    async def _read_plan(
        self, session: Session, read: Callable[[str], RewindPlan], key: str
    ) -> tuple[RewindPlan, Earlier] | Response:
        """A plan (built, or saved) and its earlier runs, off the event loop; else why not."""
        try:
            plan = await anyio.to_thread.run_sync(read, key)
            earlier = await anyio.to_thread.run_sync(self._earlier, plan.plan_id)
        except UsageError as exc:
            return _message(session, "No such plan", str(exc), 404)
        except ZertoRewindError as exc:  # the ZVM, the log or the state did not answer
            return _message(session, "Plan not read", str(exc), 503)
        return plan, earlier

    async def api_run(self, request: Request) -> Response:
        _, session = self.auth.current(request, touch=False)
        if session is None:
            return JSONResponse({"error": "log in first"}, status_code=401)
        refused = self._refusal(session)
        if refused is not None:
            return JSONResponse({"error": refused}, status_code=403)
        found = self.runs.get(request.path_params["plan_id"]) if self.runs else None
        if found is None:
            return JSONResponse({"error": "no run of this plan in this gateway"}, status_code=404)
        return JSONResponse(run_json(found))

    # ------------------------------------------------------------------ the start

    async def start(self, request: Request) -> Response:
        """Start a saved plan: an approver's POST with the page's CSRF token; else 403."""
        posted = await self.kit.posted(request)
        if isinstance(posted, Response):
            return posted
        session, form = posted
        refused = self._refusal(session)
        if refused is not None:
            log.warning("approvals page: rewind refused to %s", approver(session.name).label)
            return _message(session, "Not an approver", refused, 403)
        if self.runs is None:
            return _message(session, "Rewinds not served here", _NOT_SERVED, 503)
        mode = form.get("mode", "restore")
        if mode not in MODES:
            text = f"no rewind mode {mode[:40]!r}: restore, test or failover. Nothing was run."
            return _message(session, "Not accepted", text, 400)
        try:
            plan = await anyio.to_thread.run_sync(self._load, form.get("plan", ""))
        except UsageError as exc:
            return _message(session, "No such plan", f"{exc}. Nothing was run.", 404)
        except StateError as exc:
            return _message(session, "State unavailable", str(exc), 503)
        return self._started(session, plan, mode, form)

    def _started(
        self, session: Session, plan: RewindPlan, mode: Mode, form: dict[str, str]
    ) -> Response:
        typed = frozenset(v.strip() for k, v in form.items() if k.startswith("confirm-"))
        confirmed = typed & {v.vpg for v in plan.vms if v.vpg}
        if mode == "failover" and not confirmed:
            text = (
                "A live failover moves every VM of each VPG: type the name of each VPG to fail "
                "over in its box. No VPG name matched; nothing was run."
            )
            return _message(session, "Not confirmed", text, 400)
        runs = cast("PageRuns", self.runs)
        who = approver(session.name).label
        busy = runs.start(plan, mode, who, confirmed, resume=form.get("resume") == "1")
        if busy is not None:
            return _message(session, "Already running", busy, 409)
        log.info("approvals page: %s started rewind %s (%s)", who, plan.plan_id, mode)
        return self.kit.go(rewind_path(plan.plan_id))

    # ------------------------------------------------------------------ reads (in a thread)

    def _build(self, session_id: str) -> RewindPlan:
        from ..recovery.rewind_build import build_plan
        from ..recovery.rewind_plan import Scope
        from ..recovery.rewind_store import save_plan

        runs = cast("PageRuns", self.runs)
        plan = build_plan(runs.zvms, self.settings, Scope(session_id=session_id))
        save_plan(self.settings.state_dir, plan)
        return plan

    def _load(self, plan_id: str) -> RewindPlan:
        from ..recovery.rewind_store import load_plan

        return load_plan(self.settings.state_dir, plan_id)

    def _earlier(self, plan_id: str) -> Earlier:
        from ..recovery.rewind_store import load_run

        found = {mode: load_run(self.settings.state_dir, plan_id, mode) for mode in MODES}
        return {mode: states for mode, states in found.items() if states}
