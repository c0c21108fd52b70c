"""The /_sim control plane: faults, token expiry, tag behaviour, status, reset, stats."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

from zerto_rewind.sim import SimServer


def add_fault(anon: httpx.Client, **fault: Any) -> None:
    """POST a fault and check it was accepted."""
    response = anon.post("/_sim/faults", json=fault)
    assert response.status_code == 200, response.text


def test_status_fault_by_route_name_with_count(anon: httpx.Client, api: httpx.Client) -> None:
    """A status fault answers its status for `count` requests, then normal service resumes."""
    add_fault(anon, route="vpgs.list", kind="status", status=503, count=2)
    assert api.get("/v1/vpgs").status_code == 503
    assert api.get("/v1/vpgs").json() == {"Message": "Simulated fault"}
    assert api.get("/v1/vpgs").status_code == 200


def test_fault_by_method_and_regex_until_cleared(anon: httpx.Client, api: httpx.Client) -> None:
    """A 'METHOD regex' fault hits every matching request until DELETE /_sim/faults."""
    add_fault(anon, route="GET /v1/vms.*", kind="status", status=500)
    assert api.get("/v1/vms").status_code == 500
    assert api.get("/v1/vms", params={"vmName": "x"}).status_code == 500
    assert api.get("/v1/vpgs").status_code == 200
    assert anon.get("/_sim/faults").json()[0]["route"] == "GET /v1/vms.*"
    anon.delete("/_sim/faults")
    assert api.get("/v1/vms").status_code == 200


@pytest.mark.timeout(10)
def test_delay_fault(anon: httpx.Client, api: httpx.Client) -> None:
    """A delay fault answers normally, late."""
    add_fault(anon, route="localsite", kind="delay", delay_s=0.5, count=1)
    started = time.monotonic()
    assert api.get("/v1/localsite").status_code == 200
    assert time.monotonic() - started >= 0.5


def test_malformed_fault(anon: httpx.Client, api: httpx.Client) -> None:
    """A malformed fault answers 200 with truncated JSON."""
    add_fault(anon, route="vpgs.list", kind="malformed", count=1)
    response = api.get("/v1/vpgs")
    assert response.status_code == 200
    with pytest.raises(ValueError, match=r"Unterminated|Expecting"):
        response.json()


def test_drop_fault(anon: httpx.Client, api: httpx.Client) -> None:
    """A drop fault closes the connection without answering."""
    add_fault(anon, route="tokens", kind="drop", count=1)
    with pytest.raises(httpx.RemoteProtocolError):
        api.post("/auth/realms/zerto/protocol/openid-connect/token", data={"grant_type": "x"})
    assert api.get("/v1/localsite").status_code == 200


@pytest.mark.timeout(15)
def test_hang_fault_holds_until_cleared(anon: httpx.Client, api: httpx.Client) -> None:
    """A hang holds requests past the client's timeout; clearing faults serves the held one."""
    add_fault(anon, route="vpgs.list", kind="hang")
    with pytest.raises(httpx.ReadTimeout):
        api.get("/v1/vpgs", timeout=0.5)
    answers: list[int] = []
    held = threading.Thread(target=lambda: answers.append(api.get("/v1/vpgs").status_code))
    held.start()
    time.sleep(0.3)
    assert answers == []
    anon.delete("/_sim/faults")
    held.join(5)
    assert answers == [200]
    assert api.get("/v1/vpgs").status_code == 200


@pytest.mark.timeout(15)
def test_stop_returns_promptly_with_a_hang_active(sim: SimServer, tls: Any) -> None:
    """stop() returns within a second even while a request hangs."""
    with httpx.Client(base_url=sim.url, verify=tls) as client:
        client.post("/_sim/faults", json={"route": "localsite", "kind": "hang"})
        errors: list[BaseException] = []

        def hang() -> None:
            try:
                client.get("/v1/localsite", timeout=10)
            except httpx.HTTPError as exc:
                errors.append(exc)

        thread = threading.Thread(target=hang, daemon=True)
        thread.start()
        time.sleep(0.3)
        started = time.monotonic()
        sim.stop()
        assert time.monotonic() - started < 1.0
        thread.join(5)
        assert errors  # the held request ended with a disconnect, not an answer


def test_bad_fault_is_400(anon: httpx.Client) -> None:
    """An unknown fault kind is refused."""
    assert anon.post("/_sim/faults", json={"route": "tokens", "kind": "boom"}).status_code == 400


def test_tokens_expire(anon: httpx.Client, api: httpx.Client) -> None:
    """After /_sim/tokens/expire the next /v1 call is 401."""
    assert api.get("/v1/localsite").status_code == 200
    assert anon.post("/_sim/tokens/expire").json() == {"expired": 1}
    assert api.get("/v1/localsite").status_code == 401


def tag(api: httpx.Client, vid: str, name: str) -> None:
    """Request a tag."""
    assert api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": name}).is_success


def tags_of(api: httpx.Client, vid: str) -> list[str]:
    """Tags in the journal."""
    return [c["Tag"] for c in api.get(f"/v1/vpgs/{vid}/checkpoints").json() if c["Tag"]]


@pytest.mark.timeout(15)
def test_tag_behaviour_never_then_normal(
    anon: httpx.Client,
    api: httpx.Client,
    vpg_id: Callable[[str], str],
    wait_task: Callable[[str], dict[str, Any]],
) -> None:
    """mode never: the task completes but the tag never lands; the next tag is normal again."""
    anon.post("/_sim/vpgs/jp-local/tag-behaviour", json={"mode": "never"})
    vid = vpg_id("jp-local")
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "lost"}).json()
    assert wait_task(task_id)["Status"]["State"] == 6
    tag(api, vid, "found")
    time.sleep(1.5)
    assert tags_of(api, vid) == ["found"]


@pytest.mark.timeout(15)
def test_tag_behaviour_fail_fails_the_task_on_a_healthy_vpg(
    anon: httpx.Client,
    api: httpx.Client,
    vpg_id: Callable[[str], str],
    wait_task: Callable[[str], dict[str, Any]],
) -> None:
    """mode fail: the VPG stays healthy, the tag task fails with the reason, no tag lands."""
    answer = anon.post(
        "/_sim/vpgs/jp-local/tag-behaviour", json={"mode": "fail", "reason": "VRA is down"}
    )
    assert answer.json()["reason"] == "VRA is down"
    vid = vpg_id("jp-local")
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "refused"}).json()
    task = wait_task(task_id)
    assert (task["Status"]["State"], task["CompleteReason"]) == (4, "VRA is down")
    assert api.get(f"/v1/vpgs/{vid}").json()["Status"] == 1
    tag(api, vid, "next")  # count 1: the next tag is normal again
    time.sleep(1.5)
    assert tags_of(api, vid) == ["next"]


def test_tag_behaviour_rejects_an_empty_reason(anon: httpx.Client) -> None:
    """A reason must be a non-empty string."""
    answer = anon.post("/_sim/vpgs/jp-local/tag-behaviour", json={"mode": "fail", "reason": ""})
    assert answer.status_code == 400


@pytest.mark.timeout(15)
def test_tag_behaviour_late(
    anon: httpx.Client, api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """mode late: the tag lands extra_delay_s after it normally would."""
    anon.post("/_sim/vpgs/JP-LOCAL/tag-behaviour", json={"mode": "late", "extra_delay_s": 2})
    vid = vpg_id("jp-local")
    tag(api, vid, "late")
    time.sleep(1.4)  # a normal tag would have landed by now (cadence 1 + lag 0.3)
    assert tags_of(api, vid) == []
    time.sleep(2.0)
    assert tags_of(api, vid) == ["late"]


def test_status_change_refuses_tags_and_stops_journal(
    anon: httpx.Client,
    api: httpx.Client,
    vpg_id: Callable[[str], str],
    wait_task: Callable[[str], dict[str, Any]],
) -> None:
    """Setting a pause status shows on the VPG and makes tags fail."""
    anon.post("/_sim/vpgs/jp-local/status", json={"status": 2, "sub_status": 26})
    vid = vpg_id("jp-local")
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert (vpg["Status"], vpg["SubStatus"]) == (2, 26)
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "x"}).json()
    task = wait_task(task_id)
    assert task["Status"]["State"] == 4
    assert "ReplicationPausedSystemInitiated" in task["CompleteReason"]


@pytest.mark.timeout(15)
def test_cadence_change(
    anon: httpx.Client, api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """A new cadence spaces the following checkpoints accordingly."""
    anon.post("/_sim/vpgs/jp-local/cadence", json={"seconds": 0.25})
    time.sleep(1.3)
    vid = vpg_id("jp-local")
    recent = api.get(f"/v1/vpgs/{vid}/checkpoints").json()[-4:]
    stamps = [datetime.fromisoformat(c["TimeStamp"].replace("Z", "+00:00")) for c in recent]
    gaps = {round((b - a).total_seconds(), 2) for a, b in itertools.pairwise(stamps)}
    assert gaps == {0.25}


def test_reset_restores_estate_and_clears(
    anon: httpx.Client, api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """reset brings back the estate, clears faults, tasks and counters; ids are stable."""
    vid = vpg_id("jp-local")
    anon.post("/_sim/vpgs/jp-local/status", json={"status": 8, "sub_status": 0})
    tag(api, vid, "x")
    add_fault(anon, route="tasks.get", kind="status", status=500)
    assert anon.post("/_sim/reset").status_code == 200
    assert anon.get("/_sim/faults").json() == []
    assert api.get("/v1/tasks").json() == []
    vpg = api.get(f"/v1/vpgs/{vid}").json()
    assert vpg["Status"] == 1
    assert anon.get("/_sim/stats").json()["tag_requests"] == {}


def test_stats_counters(
    anon: httpx.Client, api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """stats counts token requests by grant, requests by route, tags by VPG and listings."""
    vid = vpg_id("jp-local")
    tag(api, vid, "one")
    api.get(f"/v1/vpgs/{vid}/checkpoints")
    anon.post("/auth/realms/zerto/protocol/openid-connect/token", data={"grant_type": "nope"})
    stats = anon.get("/_sim/stats").json()
    assert stats["token_requests"] == {"total": 2, "by_grant": {"password": 1, "nope": 1}}
    assert stats["requests"]["GET vpgs.list"] == 1
    assert stats["requests"]["POST checkpoints.tag"] == 1
    assert stats["tag_requests"] == {"jp-local": 1}
    assert stats["checkpoints_listed"] > 3000


def test_vm_actions_record(anon: httpx.Client) -> None:
    """VM actions posted by a stand-in MCP server are listed back in order."""
    assert anon.get("/_sim/vm-actions").json() == []
    anon.post("/_sim/vm-actions", json={"vm": "jp-ubuntu", "action": "reboot", "tool": "vm_power"})
    actions = anon.get("/_sim/vm-actions").json()
    assert [(a["vm"], a["action"], a["tool"]) for a in actions] == [
        ("jp-ubuntu", "reboot", "vm_power")
    ]
    assert anon.post("/_sim/vm-actions", json={"vm": 1}).status_code == 400


def test_control_plane_on_unknown_vpg_is_404(anon: httpx.Client) -> None:
    """Control calls naming an unknown VPG answer 404."""
    assert anon.post("/_sim/vpgs/none/status", json={"status": 1}).status_code == 404
