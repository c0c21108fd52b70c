"""ZvmClient request shapes, parsing, retries, re-authentication and deadlines."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from unit.zvm.zvm_fakes import (
    SECRET,
    TOKEN_PATH,
    URL,
    VM_WIRE,
    VPG_WIRE,
    FakeClock,
    FakeZvm,
    body_of,
    make_settings,
)
from zerto_rewind.errors import ApiError, AuthError, NotFound, ZvmTimeout
from zerto_rewind.zvm import ZvmClient

VPG_ID = VPG_WIRE["VpgIdentifier"]
VM_ID = VM_WIRE["VmIdentifier"]
TASK = {
    "TaskIdentifier": "t1.s1",
    "Type": "InsertTaggedCP",
    "Status": {"State": 6, "Progress": 100},
}


def cps(*items: tuple[str, str, str | None]) -> list[dict[str, Any]]:
    """Wire checkpoints from (id, timestamp, tag)."""
    return [{"CheckpointIdentifier": i, "TimeStamp": t, "Tag": g, "Type": 0} for i, t, g in items]


def test_bearer_token_and_accept_header(client: ZvmClient, zvm: FakeZvm) -> None:
    """API calls carry the Keycloak token as a Bearer header and ask for JSON."""
    zvm.route("GET", "/v1/vpgs/entitytypes", ["VCVpg", "AWS"])
    assert client.entity_types() == ["VCVpg", "AWS"]
    token_req, api_req = zvm.requests
    assert token_req.method == "POST"
    assert token_req.url == URL + TOKEN_PATH
    assert api_req.headers["Authorization"] == "Bearer tok-1"
    assert api_req.headers["Accept"] == "application/json"


def test_client_credentials_form(client: ZvmClient, zvm: FakeZvm) -> None:
    """client_credentials sends client_id and client_secret as a form, and no scope."""
    zvm.route("GET", "/v1/localsite", {"SiteIdentifier": "s"})
    client.local_site()
    form = dict(httpx.QueryParams(zvm.requests[0].content.decode()))
    assert form == {
        "grant_type": "client_credentials",
        "client_id": "rewind",
        "client_secret": SECRET,
    }
    assert zvm.requests[0].headers["Content-Type"] == "application/x-www-form-urlencoded"


def test_password_form_with_scope(zvm: FakeZvm, tmp_path: Any) -> None:
    """The password grant sends zerto-client, username and password; scope when configured."""
    settings = make_settings(grant="password", client_id="zerto-client", username="ops")
    with ZvmClient(settings, transport=httpx.MockTransport(zvm), scope="openid") as c:
        zvm.route("GET", "/v1/localsite", {})
        c.local_site()
    form = dict(httpx.QueryParams(zvm.requests[0].content.decode()))
    assert form == {
        "grant_type": "password",
        "client_id": "zerto-client",
        "username": "ops",
        "password": SECRET,
        "scope": "openid",
    }


def test_find_vms_keeps_only_exact_names(client: ZvmClient, zvm: FakeZvm) -> None:
    """find_vms queries vmName and keeps exact matches only, one per (VM, VPG): a ZVM whose
    filter ignores case or whitespace must not make a twin read as the protected VM."""
    other_vpg = {**VM_WIRE, "VpgIdentifier": "vpg-2", "VpgName": "second"}
    substring = {**VM_WIRE, "VmName": "jp-ubuntu-2", "VmIdentifier": "x.vm-2"}
    upper = {**VM_WIRE, "VmName": "JP-Ubuntu", "VmIdentifier": "x.vm-3"}
    nbsp = {**VM_WIRE, "VmName": "jp-ubuntu\u00a0", "VmIdentifier": "x.vm-4"}
    zvm.route("GET", "/v1/vms", [VM_WIRE, other_vpg, substring, VM_WIRE, upper, nbsp])
    refs = client.find_vms("jp-ubuntu")
    assert [r.vpg_name for r in refs] == ["jp-local", "second"]
    assert {r.vm_id for r in refs} == {VM_WIRE["VmIdentifier"]}
    assert zvm.api_requests()[0].url.params["vmName"] == "jp-ubuntu"
    assert [r.vm_id for r in client.find_vms("JP-Ubuntu")] == ["x.vm-3"]


def test_find_vms_reads_the_links_instance_identifier(client: ZvmClient, zvm: FakeZvm) -> None:
    linked = {**VM_WIRE, "Link": {"identifier": "x", "instance_identifier": "5012-ab"}}
    zvm.route("GET", "/v1/vms", [linked, {**VM_WIRE, "VpgIdentifier": "vpg-2"}])
    by_vpg = {r.vpg_id: r.instance_id for r in client.find_vms("jp-ubuntu")}
    assert by_vpg == {VM_WIRE["VpgIdentifier"]: "5012-ab", "vpg-2": None}


def test_find_vms_none(client: ZvmClient, zvm: FakeZvm) -> None:
    """An unknown VM gives an empty list, not an error."""
    zvm.route("GET", "/v1/vms", [])
    assert client.find_vms("ghost") == []


def test_get_vm_passes_vpg(client: ZvmClient, zvm: FakeZvm) -> None:
    """get_vm asks for one VM by id, with vpgIdentifier when given."""
    zvm.route("GET", f"/v1/vms/{VM_ID}", VM_WIRE)
    assert client.get_vm(VM_ID, VPG_ID)["VmName"] == "jp-ubuntu"
    assert zvm.api_requests()[0].url.params["vpgIdentifier"] == VPG_ID
    client.get_vm(VM_ID)
    assert "vpgIdentifier" not in zvm.api_requests()[1].url.params


def test_get_and_find_vpg(client: ZvmClient, zvm: FakeZvm) -> None:
    """get_vpg reads one VPG; find_vpg filters by name and raises NotFound when absent."""
    zvm.route("GET", f"/v1/vpgs/{VPG_ID}", VPG_WIRE)
    zvm.route("GET", "/v1/vpgs", [VPG_WIRE])
    assert client.get_vpg(VPG_ID).name == "jp-local"
    assert client.find_vpg("JP-LOCAL").vpg_id == VPG_ID
    assert zvm.api_requests()[1].url.params["name"] == "JP-LOCAL"
    with pytest.raises(NotFound, match="no VPG named 'other'"):
        client.find_vpg("other")


def test_statuses(client: ZvmClient, zvm: FakeZvm) -> None:
    """vpg_statuses returns the ZVM's status names."""
    zvm.route("GET", "/v1/vpgs/statuses", ["Initializing", "MeetingSLA"])
    assert client.vpg_statuses() == ["Initializing", "MeetingSLA"]


def test_list_checkpoints_dates_and_order(client: ZvmClient, zvm: FakeZvm) -> None:
    """Dates go out as ...fffZ; checkpoints come back sorted by time then numeric id."""
    zvm.route(
        "GET",
        f"/v1/vpgs/{VPG_ID}/checkpoints",
        cps(
            ("10", "2024-05-01T10:00:05Z", None),
            ("9", "2024-05-01T10:00:05Z", "t"),
            ("100", "2024-05-01T10:00:00.1234567Z", None),
        ),
    )
    since = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
    until = datetime(2024, 5, 1, 11, 0, tzinfo=UTC)
    got = client.list_checkpoints(VPG_ID, since=since, until=until)
    assert [c.cp_id for c in got] == ["100", "9", "10"]
    params = zvm.api_requests()[0].url.params
    assert (params["startDate"], params["endDate"]) == (
        "2024-05-01T09:00:00.000Z",
        "2024-05-01T11:00:00.000Z",
    )
    client.list_checkpoints(VPG_ID)
    assert not zvm.api_requests()[1].url.params


def test_checkpoint_stats(client: ZvmClient, zvm: FakeZvm) -> None:
    """checkpoint_stats returns (earliest, latest), either possibly None."""
    first, last = cps(("1", "2024-05-01T10:00:00Z", None), ("2", "2024-05-01T11:00:00Z", "x"))
    zvm.route("GET", f"/v1/vpgs/{VPG_ID}/checkpoints/stats", {"Earliest": first, "Latest": last})
    earliest, latest = client.checkpoint_stats(VPG_ID)
    assert (earliest and earliest.cp_id, latest and latest.tag) == ("1", "x")
    zvm.route("GET", f"/v1/vpgs/{VPG_ID}/checkpoints/stats", {"Earliest": None, "Latest": None})
    assert client.checkpoint_stats(VPG_ID) == (None, None)


def test_tag_checkpoint_body_and_task_id(client: ZvmClient, zvm: FakeZvm) -> None:
    """Tagging POSTs {"checkpointName": name} and returns the task id string."""
    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", "t1.s1")
    assert client.tag_checkpoint(VPG_ID, "before change") == "t1.s1"
    req = zvm.api_requests()[0]
    assert body_of(req) == {"checkpointName": "before change"}
    assert req.headers["Content-Type"] == "application/json"


def test_tag_checkpoint_non_string_answer(client: ZvmClient, zvm: FakeZvm) -> None:
    """A POST answered with something other than a task id string is an ApiError."""
    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", {"oops": 1})
    with pytest.raises(ApiError, match="not the JSON we expected"):
        client.tag_checkpoint(VPG_ID, "x")


@pytest.mark.parametrize(
    ("call", "path", "body"),
    [
        (lambda c: c.failover_test(VPG_ID), f"/v1/vpgs/{VPG_ID}/FailoverTest", {}),
        (
            lambda c: c.failover_test(VPG_ID, "7", [VM_ID]),
            f"/v1/vpgs/{VPG_ID}/FailoverTest",
            {"checkpointIdentifier": "7", "vmIdentifiers": [VM_ID]},
        ),
        (
            lambda c: c.failover_test_stop(VPG_ID, True, "ok"),
            f"/v1/vpgs/{VPG_ID}/FailoverTestStop",
            {"failoverTestSuccess": True, "failoverTestSummary": "ok"},
        ),
        (
            lambda c: c.failover(VPG_ID, "7"),
            f"/v1/vpgs/{VPG_ID}/Failover",
            {
                "checkpointIdentifier": "7",
                "commitPolicy": 0,
                "shutdownPolicy": 0,
                "timeToWaitBeforeShutdownInSec": 3600,
                "isReverseProtection": False,
            },
        ),
        (
            lambda c: c.failover_commit(VPG_ID, True),
            f"/v1/vpgs/{VPG_ID}/FailoverCommit",
            {"isReverseProtection": True},
        ),
        (lambda c: c.failover_rollback(VPG_ID), f"/v1/vpgs/{VPG_ID}/FailoverRollback", None),
        (
            lambda c: c.restore_vm(VM_ID, VPG_ID, "7", restored_vm_name="r", wait_s=600),
            f"/v1/vms/{VM_ID}/Restore",
            {
                "vpgIdentifier": VPG_ID,
                "restoredVmName": "r",
                "checkpointIdentifier": "7",
                "commitPolicy": 0,
                "shutdownPolicy": 0,
                "timeToWaitBeforeContinueInSeconds": 600,
            },
        ),
        (lambda c: c.restore_commit(VM_ID, VPG_ID), f"/v1/vms/{VM_ID}/RestoreCommit", VPG_ID),
        (lambda c: c.restore_rollback(VM_ID, VPG_ID), f"/v1/vms/{VM_ID}/RestoreRollback", VPG_ID),
    ],
)
def test_recovery_request_shapes(
    client: ZvmClient, zvm: FakeZvm, call: Any, path: str, body: Any
) -> None:
    """Recovery operations POST the documented camelCase bodies and return the task id."""
    zvm.route("POST", path, "task.site")
    assert call(client) == "task.site"
    req = zvm.api_requests()[0]
    assert (req.method, req.url.path) == ("POST", path)
    assert (body_of(req) if req.content else None) == body


def test_wait_for_task_polls_until_done(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """wait_for_task polls every poll_s until the task is done."""
    states = iter([1, 1, 6])
    zvm.route(
        "GET",
        "/v1/tasks/t1.s1",
        lambda r: httpx.Response(
            200, json={**TASK, "Status": {"State": next(states), "Progress": 50}}
        ),
    )
    task = client.wait_for_task("t1.s1", deadline=clock() + 10, poll_s=0.5)
    assert task.succeeded
    assert clock.sleeps == [0.5, 0.5]


def test_wait_for_task_deadline(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """A task still running at the deadline raises ZvmTimeout naming its state."""
    zvm.route("GET", "/v1/tasks/t1.s1", {**TASK, "Status": {"State": 1, "Progress": 40}})
    with pytest.raises(ZvmTimeout, match=r"IN_PROGRESS \(40%\)"):
        client.wait_for_task("t1.s1", deadline=clock() + 2, poll_s=0.5)
    assert clock.now <= 1002


def test_token_reused_across_calls(client: ZvmClient, zvm: FakeZvm) -> None:
    """One token serves many calls; request_count counts token and API requests."""
    zvm.route("GET", "/v1/localsite", {})
    for _ in range(3):
        client.local_site()
    assert zvm.tokens_issued == 1
    assert client.request_count == 4


def test_401_reauthenticates_once(client: ZvmClient, zvm: FakeZvm) -> None:
    """A 401 drops the token, fetches a new one and retries the call once."""
    zvm.route("GET", "/v1/localsite", {"SiteIdentifier": "s"})
    client.local_site()
    zvm.valid_tokens.clear()  # the ZVM forgets every token it issued
    assert client.local_site() == {"SiteIdentifier": "s"}
    assert zvm.tokens_issued == 2
    assert zvm.api_requests()[-1].headers["Authorization"] == "Bearer tok-2"


def test_401_on_post_is_resent(client: ZvmClient, zvm: FakeZvm) -> None:
    """A POST refused with 401 was not executed, so it is sent again after re-auth."""
    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", "t.s")
    client.tag_checkpoint(VPG_ID, "a")
    zvm.valid_tokens.clear()
    assert client.tag_checkpoint(VPG_ID, "b") == "t.s"
    assert [body_of(r)["checkpointName"] for r in zvm.api_requests()] == ["a", "b", "b"]


def test_second_401_is_auth_error(client: ZvmClient, zvm: FakeZvm) -> None:
    """A 401 even with a fresh token raises AuthError after exactly one retry."""
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(401))
    with pytest.raises(AuthError, match="401 twice"):
        client.local_site()
    assert zvm.tokens_issued == 2
    assert len(zvm.api_requests()) == 2


def test_token_endpoint_refusal(zvm: FakeZvm) -> None:
    """A 401 from Keycloak is an AuthError naming grant and client, never the secret."""
    zvm.token_status = 401
    settings = make_settings()
    with (
        ZvmClient(settings, transport=httpx.MockTransport(zvm)) as c,
        pytest.raises(AuthError) as info,
    ):
        c.local_site()
    text = str(info.value)
    assert "client_credentials grant for client 'rewind'" in text
    assert "unauthorized_client" in text
    assert "check the configured credentials" in text
    assert SECRET not in text


def test_token_endpoint_400_password(zvm: FakeZvm) -> None:
    """A 400 for the password grant names the user too."""
    zvm.token_status = 400
    settings = make_settings(grant="password", client_id="zerto-client", username="ops")
    with (
        ZvmClient(settings, transport=httpx.MockTransport(zvm)) as c,
        pytest.raises(AuthError, match="user 'ops'"),
    ):
        c.local_site()


def test_token_body_without_access_token(zvm: FakeZvm) -> None:
    """A token answer without access_token is an ApiError about the body."""
    settings = make_settings()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"token_type": "Bearer"})

    client = ZvmClient(settings, transport=httpx.MockTransport(handler))
    with client, pytest.raises(ApiError, match="no access_token"):
        client.local_site()


def test_get_retries_5xx_with_backoff(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """A GET answered 503 is retried with growing, jittered backoff, then succeeds."""
    answers = iter([503, 502, 200])
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(next(answers), json={}))
    assert client.local_site() == {}
    assert len(clock.sleeps) == 2
    assert 0.1 <= clock.sleeps[0] <= 0.3
    assert 0.2 <= clock.sleeps[1] <= 0.6


def test_get_retries_are_bounded(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """After `retries` retries the 5xx is reported as an ApiError with the Message."""
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(500, json={"Message": "db down"}))
    with pytest.raises(
        ApiError, match=r"GET https://zvm.example(:443)?/v1/localsite → HTTP 500: db down"
    ) as info:
        client.local_site()
    assert info.value.status == 500
    assert len(zvm.api_requests()) == 3


def test_post_not_retried_on_5xx(client: ZvmClient, zvm: FakeZvm) -> None:
    """A POST answered 500 is not retried: it may have been executed."""
    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", lambda r: httpx.Response(500, text="boom"))
    with pytest.raises(ApiError, match="HTTP 500: boom"):
        client.tag_checkpoint(VPG_ID, "x")
    assert len(zvm.api_requests()) == 1


def test_post_retried_on_connect_error(client: ZvmClient, zvm: FakeZvm) -> None:
    """A POST whose connection never came up is retried."""
    failures = iter([True, False])

    def flaky(request: httpx.Request) -> httpx.Response:
        if next(failures):
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json="t.s")

    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", flaky)
    assert client.tag_checkpoint(VPG_ID, "x") == "t.s"


def test_post_not_retried_on_read_timeout(client: ZvmClient, zvm: FakeZvm) -> None:
    """A POST whose answer timed out is not retried (it may have run) and is a ZvmTimeout."""

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    zvm.route("POST", f"/v1/vpgs/{VPG_ID}/checkpoints", slow)
    with pytest.raises(ZvmTimeout):
        client.tag_checkpoint(VPG_ID, "x")
    assert len(zvm.api_requests()) == 1


def test_404_is_not_found_with_message(client: ZvmClient, zvm: FakeZvm) -> None:
    """A 404 becomes NotFound carrying method, URL, status and the Message."""
    with pytest.raises(NotFound) as info:
        client.get_vpg("missing")
    err = info.value
    assert (err.method, err.status) == ("GET", 404)
    assert err.url.endswith("/v1/vpgs/missing")
    assert "no route /v1/vpgs/missing" in str(err)


def test_403_hint(client: ZvmClient, zvm: FakeZvm) -> None:
    """A 403 says that the account's role does not allow the call."""
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(403))
    with pytest.raises(ApiError, match="Zerto role"):
        client.local_site()


def test_error_body_excerpt_is_bounded(client: ZvmClient, zvm: FakeZvm) -> None:
    """Error messages carry at most 300 characters of the body."""
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(400, text="x" * 5000))
    with pytest.raises(ApiError) as info:
        client.local_site()
    assert len(info.value.body) == 300
    assert "x" * 301 not in str(info.value)


@pytest.mark.parametrize("body", [b"not json", b"[1, 2", b'{"VpgName": 5}'])
def test_malformed_body(client: ZvmClient, zvm: FakeZvm, body: bytes) -> None:
    """A 200 whose body is not the JSON we expect is an ApiError saying so."""
    zvm.route("GET", f"/v1/vpgs/{VPG_ID}", lambda r: httpx.Response(200, content=body))
    with pytest.raises(ApiError, match="not the JSON we expected"):
        client.get_vpg(VPG_ID)


def test_deadline_passed_sends_nothing(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """With no time left, the call raises ZvmTimeout before sending anything."""
    with pytest.raises(ZvmTimeout):
        client.local_site(deadline=clock() - 1)
    assert zvm.requests == []


def test_timeout_is_capped_by_deadline(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """Each request's timeouts are the configured ones capped by the time left."""
    zvm.route("GET", "/v1/localsite", {})
    client.local_site(deadline=clock() + 2.5)
    timeouts = zvm.api_requests()[0].extensions["timeout"]
    assert timeouts == {"connect": 2.5, "read": 2.5, "write": 2.5, "pool": 2.5}
    client.local_site()
    assert zvm.api_requests()[1].extensions["timeout"] == {
        "connect": 5.0,
        "read": 30.0,
        "write": 30.0,
        "pool": 5.0,
    }


def test_retries_stop_at_deadline(client: ZvmClient, zvm: FakeZvm, clock: FakeClock) -> None:
    """No retry is slept for when it would end past the deadline."""
    zvm.route("GET", "/v1/localsite", lambda r: httpx.Response(503))
    with pytest.raises(ApiError, match="503"):
        client.local_site(deadline=clock() + 0.05)
    assert len(zvm.api_requests()) == 1
    assert clock.sleeps == []


def test_verify_tls_false_logs_warning(zvm: FakeZvm, caplog: pytest.LogCaptureFixture) -> None:
    """Turning TLS verification off is announced with a warning."""
    with ZvmClient(make_settings(verify_tls=False), transport=httpx.MockTransport(zvm)):
        pass
    assert "TLS verification" in caplog.text
    assert "OFF" in caplog.text
