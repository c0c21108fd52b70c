"""Fixtures for the simulator's integration tests: a real TLS server per test."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from support.sim import sim_fixture
from zerto_rewind.sim import SimServer

TOKEN_PATH = "/auth/realms/zerto/protocol/openid-connect/token"

sim = sim_fixture()


@pytest.fixture
def tls(sim: SimServer) -> ssl.SSLContext:
    """A client TLS context trusting only the simulator's CA."""
    assert sim.ca_bundle is not None
    return ssl.create_default_context(cafile=sim.ca_bundle)


@pytest.fixture
def anon(sim: SimServer, tls: ssl.SSLContext) -> Iterator[httpx.Client]:
    """A client without a token (also used for the control plane)."""
    with httpx.Client(base_url=sim.url, verify=tls, timeout=5.0) as client:
        yield client


def password_token(client: httpx.Client, sim: SimServer) -> str:
    """A token from the password grant."""
    creds = sim.credentials
    form = {
        "grant_type": "password",
        "client_id": "zerto-client",
        "username": creds["username"],
        "password": creds["password"],
    }
    response = client.post(TOKEN_PATH, data=form)
    assert response.status_code == 200, response.text
    return str(response.json()["access_token"])


@pytest.fixture
def api(sim: SimServer, tls: ssl.SSLContext) -> Iterator[httpx.Client]:
    """A client carrying a valid bearer token."""
    with httpx.Client(base_url=sim.url, verify=tls, timeout=5.0) as client:
        client.headers["Authorization"] = f"Bearer {password_token(client, sim)}"
        yield client


@pytest.fixture
def vpg_id(api: httpx.Client) -> Callable[[str], str]:
    """Look up a VPG's identifier by name."""

    def find(name: str) -> str:
        rows = api.get("/v1/vpgs", params={"name": name}).json()
        assert len(rows) == 1, rows
        return str(rows[0]["VpgIdentifier"])

    return find


@pytest.fixture
def wait_task(api: httpx.Client) -> Callable[[str], dict[str, Any]]:
    """Poll a task until it leaves InProgress; fail after 5 s."""

    def wait(task_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            task: dict[str, Any] = api.get(f"/v1/tasks/{task_id}").json()
            if task["Status"]["State"] != 1:
                return task
            time.sleep(0.02)
        raise AssertionError(f"task {task_id} still running")

    return wait
