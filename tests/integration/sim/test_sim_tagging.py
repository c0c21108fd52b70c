"""Tagged checkpoints: the task, the landing time, refusals."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx
import pytest

LAG = 0.3  # the fixture's tag_lag_s


def epoch(stamp: str) -> float:
    """ISO Z → epoch seconds."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def watch_for_tag(
    api: httpx.Client, vpg: str, tag: str, timeout: float
) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
    """Poll the checkpoint list until ``tag`` shows; return (wall time seen, checkpoint, list)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        listing = api.get(f"/v1/vpgs/{vpg}/checkpoints").json()
        seen = time.time()
        found = [c for c in listing if c["Tag"] == tag]
        if found:
            return seen, found[0], listing
        time.sleep(0.02)
    raise AssertionError(f"tag {tag!r} never appeared")


def expected_landing(listing_before: list[dict[str, Any]], started: float, cadence: float) -> float:
    """First grid point after the request, plus the lag (jitter is 0 in these tests)."""
    boundary = epoch(listing_before[-1]["TimeStamp"])
    while boundary <= started:
        boundary += cadence
    return boundary + LAG


@pytest.mark.timeout(15)
def test_tag_task_goes_in_progress_then_completed(
    api: httpx.Client, vpg_id: Callable[[str], str], wait_task: Callable[[str], dict[str, Any]]
) -> None:
    """A tag returns a task id string; the task is InProgress(1) then Completed(6) at 100%."""
    vid = vpg_id("jp-local")
    response = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "before-rm"})
    assert response.status_code == 200
    task_id = response.json()
    assert isinstance(task_id, str)
    assert task_id.endswith("." + api.get("/v1/localsite").json()["SiteIdentifier"])
    running = api.get(f"/v1/tasks/{task_id}").json()
    assert running["Status"] == {"State": 1, "Progress": running["Status"]["Progress"]}
    assert running["Completed"] is None
    assert running["Type"] == "InsertTaggedCP"
    assert running["RelatedEntities"]["Vpgs"][0]["identifier"] == vid
    done = wait_task(task_id)
    assert done["Status"] == {"State": 6, "Progress": 100}
    assert done["Completed"].endswith("Z")
    assert done["CompleteReason"] == ""


@pytest.mark.timeout(15)
@pytest.mark.parametrize(("vpg_name", "cadence"), [("jp-local", 1.0), ("CMH-AWS-1", 3.0)])
def test_tag_lands_at_next_boundary_plus_lag_and_not_before(
    api: httpx.Client,
    vpg_id: Callable[[str], str],
    wait_task: Callable[[str], dict[str, Any]],
    vpg_name: str,
    cadence: float,
) -> None:
    """The tag appears at the next cadence boundary + lag, never earlier, with ids in order."""
    vid = vpg_id(vpg_name)
    before = api.get(f"/v1/vpgs/{vid}/checkpoints").json()
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"CheckpointName": "t1"}).json()
    started = epoch(wait_task(task_id)["Started"])
    seen, tagged, listing = watch_for_tag(api, vid, "t1", cadence + 2)
    landing = expected_landing(before, started, cadence)
    assert abs(epoch(tagged["TimeStamp"]) - landing) < 0.002
    assert seen >= landing - 0.002
    assert tagged["Type"] == 1
    ids = [int(c["CheckpointIdentifier"]) for c in listing]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    stamps = [epoch(c["TimeStamp"]) for c in listing]
    assert stamps == sorted(stamps)


@pytest.mark.timeout(15)
def test_tag_keeps_its_id_as_the_journal_moves(
    api: httpx.Client, vpg_id: Callable[[str], str]
) -> None:
    """A landed tag keeps its identifier while newer checkpoints arrive."""
    vid = vpg_id("jp-local")
    api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointname": "stable"})
    _, first, _ = watch_for_tag(api, vid, "stable", 3)
    time.sleep(1.1)
    _, again, listing = watch_for_tag(api, vid, "stable", 1)
    assert again == first
    assert int(listing[-1]["CheckpointIdentifier"]) > int(first["CheckpointIdentifier"])


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({}, 400),
        ({"checkpointName": ""}, 400),
        ({"checkpointName": "x" * 129}, 400),
        ({"checkpointName": "x" * 128}, 200),
    ],
)
def test_tag_name_validation(
    api: httpx.Client, vpg_id: Callable[[str], str], body: dict[str, str], status: int
) -> None:
    """An empty, missing or over-128-character name is 400 with a Message."""
    response = api.post(f"/v1/vpgs/{vpg_id('jp-local')}/checkpoints", json=body)
    assert response.status_code == status
    if status == 400:
        assert response.json()["Message"]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    ("vpg_name", "why"),
    [("paused-vpg", "replication is paused"), ("syncing-vpg", "initial sync")],
)
def test_refused_tag_fails_fast_with_reason(
    api: httpx.Client,
    vpg_id: Callable[[str], str],
    wait_task: Callable[[str], dict[str, Any]],
    vpg_name: str,
    why: str,
) -> None:
    """A paused or syncing VPG accepts the request but the task fails within a second."""
    vid = vpg_id(vpg_name)
    asked = time.monotonic()
    task_id = api.post(f"/v1/vpgs/{vid}/checkpoints", json={"checkpointName": "no"}).json()
    task = wait_task(task_id)
    assert time.monotonic() - asked < 1.0
    assert task["Status"]["State"] == 4
    assert why in task["CompleteReason"]
    assert vpg_name in task["CompleteReason"]
    time.sleep(0.5)
    listing = api.get(f"/v1/vpgs/{vid}/checkpoints").json()
    assert all(c["Tag"] != "no" for c in listing)
