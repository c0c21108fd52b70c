"""A synchronous client for the parts of the ZVM 10.x REST API zerto-rewind uses.

Example::

    with ZvmClient(settings.zvm, token_cache=TokenCache(settings.state_dir)) as zvm:
        deadline = time.monotonic() + 30
        for ref in zvm.find_vms("jp-ubuntu", deadline=deadline):
            vpg = zvm.get_vpg(ref.vpg_id, deadline=deadline)
            task_id = zvm.tag_checkpoint(vpg.vpg_id, "before change", deadline=deadline)

Every method takes ``deadline``, an absolute ``time.monotonic()`` value: no
request is sent, retried or waited for past it. Errors are always from
:mod:`zerto_rewind.errors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from ..errors import AuthError, NotFound, ZvmError, ZvmTimeout
from ._http import HttpCore, ZvmSettingsLike, api_error, bad_body, decode_json
from .auth import TokenCacheLike, TokenProvider
from .models import Checkpoint, Task, VmRef, Vpg, format_iso

if TYPE_CHECKING:
    import httpx  # only in annotations; _http imports it, without its CLI

__all__ = ["ZvmClient"]

T = TypeVar("T")

_HINTS = {
    403: "the account's Zerto role does not allow this; use a role such as admin",
    409: "the VPG is busy with another operation; retry later",
}


def _seg(value: str) -> str:
    """Quote one path segment (identifiers contain dots, never slashes)."""
    return quote(value, safe=".-_~")


class ZvmClient:
    """One ZVM, one connection pool, one identity's bearer token."""

    def __init__(
        self,
        settings: ZvmSettingsLike,
        *,
        token_cache: TokenCacheLike | None = None,
        transport: httpx.BaseTransport | None = None,
        retries: int = 2,
        backoff_s: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        scope: str | None = None,
        on_failure: Callable[[ZvmError], None] | None = None,
    ) -> None:
        """``on_failure`` hears of every request that fails with a ZvmError (the estate
        marks a site down with it) before the error goes on to the caller."""
        self._on_failure = on_failure
        self._http = HttpCore(
            settings,
            transport=transport,
            retries=retries,
            backoff_s=backoff_s,
            clock=clock,
            sleep=sleep,
        )
        scope = scope if scope is not None else getattr(settings, "scope", None)
        self._tokens = TokenProvider(settings, self._http, cache=token_cache, scope=scope)
        self.settings = settings

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far, token requests and retries included."""
        return self._http.request_count

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> ZvmClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing

    def _call(
        self, method: str, path: str, *, deadline: float | None, **kwargs: Any
    ) -> httpx.Response:
        """Send an authenticated request; on 401 re-authenticate once."""
        try:
            return self._call_once(method, path, deadline=deadline, **kwargs)
        except ZvmError as exc:
            if self._on_failure is not None:
                self._on_failure(exc)
            raise

    def _call_once(
        self, method: str, path: str, *, deadline: float | None, **kwargs: Any
    ) -> httpx.Response:
        idempotent = method == "GET"
        for attempt in range(2):
            token = self._tokens.token(deadline)
            headers = {"Authorization": f"Bearer {token}"}
            response = self._http.request(
                method, path, deadline=deadline, idempotent=idempotent, headers=headers, **kwargs
            )
            if response.status_code != 401:
                break
            # 401 means the request was refused, so sending it again is safe.
            self._tokens.invalidate(token, deadline)
            if attempt == 1:
                msg = f"{method} {response.request.url} → HTTP 401 twice, with a fresh token; "
                raise AuthError(msg + "check that the account still has a Zerto role")
        if response.is_success:
            return response
        raise api_error(response, _HINTS.get(response.status_code, ""))

    def _get(
        self, path: str, *, deadline: float | None, params: dict[str, str | None] | None = None
    ) -> httpx.Response:
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        return self._call("GET", path, deadline=deadline, params=clean or None)

    def _post(self, path: str, body: Any, *, deadline: float | None) -> str:
        """POST ``body`` (None: no body) and return the task id the ZVM answers with."""
        kwargs = {} if body is None else {"json": body}
        response = self._call("POST", path, deadline=deadline, **kwargs)
        task_id = decode_json(response)
        if not isinstance(task_id, str) or not task_id:
            raise bad_body(response, "expected a task identifier string")
        return task_id

    @staticmethod
    def _parse(response: httpx.Response, parse: Callable[[Any], T]) -> T:
        data = decode_json(response)
        try:
            return parse(data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise bad_body(response, str(exc)) from exc

    @staticmethod
    def _many(parse: Callable[[Any], T]) -> Callable[[Any], list[T]]:
        def parse_list(data: Any) -> list[T]:
            if not isinstance(data, list):
                msg = f"expected a JSON array, got {type(data).__name__}"
                raise ValueError(msg)
            return [parse(item) for item in data]

        return parse_list

    # ------------------------------------------------------------ VMs and VPGs

    def find_vms(self, name: str, *, deadline: float | None = None) -> list[VmRef]:
        """Every (VM, VPG) pair whose VM name is exactly ``name``; [] if none.

        Exact, as the VM server matches it: the ZVM's own ``vmName`` filter may
        ignore case (UNCONFIRMED), so ``Web-01`` or ``web-01\u00a0`` rows are dropped
        here; they are other VMs to vCenter. Several ``vm_id`` values mean several
        VMs of that name, which the guard treats as ambiguous.
        """
        response = self._get("/v1/vms", params={"vmName": name}, deadline=deadline)
        refs = self._parse(response, self._many(VmRef.from_wire))
        unique = {(r.vm_id, r.vpg_id): r for r in refs if r.vm_name == name}
        return list(unique.values())

    def vpg_vms(self, vpg_name: str, *, deadline: float | None = None) -> list[VmRef]:
        """Every VM of the VPG named ``vpg_name`` (``GET /v1/vms?vpgName=``)."""
        response = self._get("/v1/vms", params={"vpgName": vpg_name}, deadline=deadline)
        refs = self._parse(response, self._many(VmRef.from_wire))
        return [r for r in refs if r.vpg_name == vpg_name]

    def get_vm(
        self, vm_id: str, vpg_id: str | None = None, *, deadline: float | None = None
    ) -> dict[str, Any]:
        """The raw ``VmApi`` object for one VM (``vpg_id`` picks the VPG if it is in several)."""
        response = self._get(
            f"/v1/vms/{_seg(vm_id)}", params={"vpgIdentifier": vpg_id}, deadline=deadline
        )
        return self._parse(response, _object)

    def get_vpg(self, vpg_id: str, *, deadline: float | None = None) -> Vpg:
        """One VPG by identifier; NotFound if the ZVM does not know it."""
        response = self._get(f"/v1/vpgs/{_seg(vpg_id)}", deadline=deadline)
        return self._parse(response, Vpg.from_wire)

    def find_vpg(self, name: str, *, deadline: float | None = None) -> Vpg:
        """The VPG named ``name`` (case-insensitive); NotFound if there is none."""
        response = self._get("/v1/vpgs", params={"name": name}, deadline=deadline)
        vpgs = self._parse(response, self._many(Vpg.from_wire))
        for vpg in vpgs:
            if vpg.name.casefold() == name.casefold():
                return vpg
        req = response.request
        msg = f"no VPG named {name!r} on {self.settings.url}"
        raise NotFound(msg, method=req.method, url=str(req.url), status=response.status_code)

    def entity_types(self, *, deadline: float | None = None) -> list[str]:
        """``GET /v1/vpgs/entitytypes``: site-type names indexed by ``Entities`` value."""
        return self._parse(self._get("/v1/vpgs/entitytypes", deadline=deadline), _strings)

    def vpg_statuses(self, *, deadline: float | None = None) -> list[str]:
        """``GET /v1/vpgs/statuses``: status names indexed by ``Status`` value."""
        return self._parse(self._get("/v1/vpgs/statuses", deadline=deadline), _strings)

    def local_site(self, *, deadline: float | None = None) -> dict[str, Any]:
        """The raw ``GET /v1/localsite`` object."""
        return self._parse(self._get("/v1/localsite", deadline=deadline), _object)

    def peer_sites(self, *, deadline: float | None = None) -> list[dict[str, Any]]:
        """The raw ``GET /v1/peersites`` objects: the sites this ZVM's site is paired with."""
        return self._parse(self._get("/v1/peersites", deadline=deadline), self._many(_object))

    def list_vpgs(self, *, deadline: float | None = None) -> list[Vpg]:
        """``GET /v1/vpgs``: every VPG this ZVM lists (protected from or recovering to it)."""
        return self._parse(self._get("/v1/vpgs", deadline=deadline), self._many(Vpg.from_wire))

    # ------------------------------------------------------------ checkpoints and tasks

    def list_checkpoints(
        self,
        vpg_id: str,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        deadline: float | None = None,
    ) -> list[Checkpoint]:
        """The VPG's checkpoints in ``[since, until]``, oldest first (then by numeric id)."""
        params = {
            "startDate": format_iso(since) if since else None,
            "endDate": format_iso(until) if until else None,
        }
        response = self._get(
            f"/v1/vpgs/{_seg(vpg_id)}/checkpoints", params=params, deadline=deadline
        )
        checkpoints = self._parse(response, self._many(Checkpoint.from_wire))
        return sorted(checkpoints, key=Checkpoint.sort_key)

    def checkpoint_stats(
        self, vpg_id: str, *, deadline: float | None = None
    ) -> tuple[Checkpoint | None, Checkpoint | None]:
        """The VPG's (earliest, latest) checkpoints; either may be None."""
        response = self._get(f"/v1/vpgs/{_seg(vpg_id)}/checkpoints/stats", deadline=deadline)
        return self._parse(response, _stats)

    def tag_checkpoint(self, vpg_id: str, name: str, *, deadline: float | None = None) -> str:
        """Ask for a tagged checkpoint named ``name``; returns the task id."""
        path = f"/v1/vpgs/{_seg(vpg_id)}/checkpoints"
        return self._post(path, {"checkpointName": name}, deadline=deadline)

    def get_task(self, task_id: str, *, deadline: float | None = None) -> Task:
        """One task by identifier."""
        response = self._get(f"/v1/tasks/{_seg(task_id)}", deadline=deadline)
        return self._parse(response, Task.from_wire)

    def wait_for_task(self, task_id: str, *, deadline: float | None, poll_s: float = 0.5) -> Task:
        """Poll until the task is Completed, Failed or Stopped; ZvmTimeout at the deadline."""
        clock, sleep = self._http.clock, self._http.sleep
        while True:
            task = self.get_task(task_id, deadline=deadline)
            if task.done:
                return task
            if deadline is not None and clock() + poll_s >= deadline:
                msg = (
                    f"task {task_id} is still {task.state_name} ({task.progress}%) at the deadline"
                )
                raise ZvmTimeout(msg)
            sleep(poll_s)

    # ------------------------------------------------------------ recovery

    def failover_test(
        self,
        vpg_id: str,
        checkpoint_id: str | None = None,
        vm_ids: list[str] | None = None,
        *,
        deadline: float | None = None,
    ) -> str:
        """Start a failover test (latest checkpoint and all VMs unless given); task id."""
        body = _drop_none({"checkpointIdentifier": checkpoint_id, "vmIdentifiers": vm_ids})
        return self._post(f"/v1/vpgs/{_seg(vpg_id)}/FailoverTest", body, deadline=deadline)

    def failover_test_stop(
        self, vpg_id: str, success: bool, summary: str, *, deadline: float | None = None
    ) -> str:
        """Stop the running failover test, recording its result; task id."""
        body = {"failoverTestSuccess": success, "failoverTestSummary": summary}
        return self._post(f"/v1/vpgs/{_seg(vpg_id)}/FailoverTestStop", body, deadline=deadline)

    def failover(
        self,
        vpg_id: str,
        checkpoint_id: str,
        *,
        commit_policy: int = 0,
        shutdown_policy: int = 0,
        time_to_wait_before_shutdown_s: int = 3600,
        reverse_protection: bool = False,
        vm_ids: list[str] | None = None,
        deadline: float | None = None,
    ) -> str:
        """Live failover to ``checkpoint_id`` (commit policy 0 = Rollback); task id."""
        body = _drop_none(
            {
                "checkpointIdentifier": checkpoint_id,
                "commitPolicy": commit_policy,
                "shutdownPolicy": shutdown_policy,
                "timeToWaitBeforeShutdownInSec": time_to_wait_before_shutdown_s,
                "isReverseProtection": reverse_protection,
                "vmIdentifiers": vm_ids,
            }
        )
        return self._post(f"/v1/vpgs/{_seg(vpg_id)}/Failover", body, deadline=deadline)

    def failover_commit(
        self, vpg_id: str, reverse_protection: bool, *, deadline: float | None = None
    ) -> str:
        """Commit a failover that is waiting before commit; task id."""
        body = {"isReverseProtection": reverse_protection}
        return self._post(f"/v1/vpgs/{_seg(vpg_id)}/FailoverCommit", body, deadline=deadline)

    def failover_rollback(self, vpg_id: str, *, deadline: float | None = None) -> str:
        """Roll back a failover that is waiting before commit; task id."""
        return self._post(f"/v1/vpgs/{_seg(vpg_id)}/FailoverRollback", None, deadline=deadline)

    def restore_vm(
        self,
        vm_id: str,
        vpg_id: str,
        checkpoint_id: str,
        *,
        restored_vm_name: str | None = None,
        commit_policy: int = 0,
        shutdown_policy: int = 0,
        wait_s: int = 3600,
        deadline: float | None = None,
    ) -> str:
        """Journal VM restore of one VM to ``checkpoint_id``; task id."""
        body = _drop_none(
            {
                "vpgIdentifier": vpg_id,
                "restoredVmName": restored_vm_name,
                "checkpointIdentifier": checkpoint_id,
                "commitPolicy": commit_policy,
                "shutdownPolicy": shutdown_policy,
                "timeToWaitBeforeContinueInSeconds": wait_s,
            }
        )
        return self._post(f"/v1/vms/{_seg(vm_id)}/Restore", body, deadline=deadline)

    def restore_commit(self, vm_id: str, vpg_id: str, *, deadline: float | None = None) -> str:
        """Commit a journal VM restore; task id."""
        return self._post(f"/v1/vms/{_seg(vm_id)}/RestoreCommit", vpg_id, deadline=deadline)

    def restore_rollback(self, vm_id: str, vpg_id: str, *, deadline: float | None = None) -> str:
        """Roll back a journal VM restore; task id."""
        return self._post(f"/v1/vms/{_seg(vm_id)}/RestoreRollback", vpg_id, deadline=deadline)


def _drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}


def _object(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        msg = f"expected a JSON object, got {type(data).__name__}"
        raise ValueError(msg)
    return data


def _strings(data: Any) -> list[str]:
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        msg = "expected a JSON array of strings"
        raise ValueError(msg)
    return list(data)


def _stats(data: Any) -> tuple[Checkpoint | None, Checkpoint | None]:
    d = _object(data)
    earliest, latest = d.get("Earliest"), d.get("Latest")
    return (
        Checkpoint.from_wire(earliest) if earliest else None,
        Checkpoint.from_wire(latest) if latest else None,
    )
