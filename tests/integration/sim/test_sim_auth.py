"""Keycloak token grants and bearer checks on /v1."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator

import httpx
import pytest

from zerto_rewind.sim import SimConfig, SimServer

TOKEN = "/auth/realms/zerto/protocol/openid-connect/token"
TOKEN_FIELDS = {
    "access_token",
    "expires_in",
    "refresh_expires_in",
    "refresh_token",
    "token_type",
    "not-before-policy",
    "session_state",
    "scope",
}


def test_password_grant_returns_keycloak_token(anon: httpx.Client, sim: SimServer) -> None:
    """The password grant with zerto-client returns all eight Keycloak fields."""
    creds = sim.credentials
    form = {"grant_type": "password", "client_id": "zerto-client"}
    form |= {"username": creds["username"], "password": creds["password"]}
    body = anon.post(TOKEN, data=form).json()
    assert set(body) == TOKEN_FIELDS
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 300


def test_client_credentials_grant(anon: httpx.Client, sim: SimServer) -> None:
    """client_credentials with the configured client and secret gets a working token."""
    creds = sim.credentials
    form = {"grant_type": "client_credentials", "client_id": creds["client_id"]}
    form["client_secret"] = creds["client_secret"]
    token = anon.post(TOKEN, data=form).json()["access_token"]
    response = anon.get("/v1/localsite", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200


def test_bad_password_is_invalid_grant(anon: httpx.Client, sim: SimServer) -> None:
    """A wrong password answers 401 invalid_grant / Invalid user credentials."""
    form = {"grant_type": "password", "client_id": "zerto-client"}
    form |= {"username": sim.credentials["username"], "password": "wrong"}
    response = anon.post(TOKEN, data=form)
    assert response.status_code == 401
    assert response.json() == {
        "error": "invalid_grant",
        "error_description": "Invalid user credentials",
    }


def test_bad_secret_is_unauthorized_client(anon: httpx.Client, sim: SimServer) -> None:
    """A wrong client secret answers 401 unauthorized_client."""
    form = {"grant_type": "client_credentials", "client_id": sim.credentials["client_id"]}
    form["client_secret"] = "nope"
    response = anon.post(TOKEN, data=form)
    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized_client"
    assert response.json()["error_description"] == "Invalid client or Invalid client credentials"


def test_unknown_grant_is_400(anon: httpx.Client) -> None:
    """An unsupported grant_type answers 400 unsupported_grant_type."""
    response = anon.post(TOKEN, data={"grant_type": "implicit"})
    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


def test_refresh_token_grant(anon: httpx.Client, sim: SimServer) -> None:
    """A refresh token can be exchanged once for a new access token."""
    creds = sim.credentials
    form = {"grant_type": "password", "client_id": "zerto-client"}
    form |= {"username": creds["username"], "password": creds["password"]}
    refresh = anon.post(TOKEN, data=form).json()["refresh_token"]
    again = {"grant_type": "refresh_token", "client_id": "zerto-client", "refresh_token": refresh}
    assert anon.post(TOKEN, data=again).status_code == 200
    assert anon.post(TOKEN, data=again).status_code == 400


def test_v1_without_token_is_401(anon: httpx.Client) -> None:
    """/v1 without a bearer answers 401, empty body, WWW-Authenticate: Bearer."""
    response = anon.get("/v1/vpgs")
    assert response.status_code == 401
    assert response.content == b""
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_v1_with_unknown_token_is_401(anon: httpx.Client) -> None:
    """A made-up token is refused."""
    response = anon.get("/v1/vpgs", headers={"Authorization": "Bearer made-up"})
    assert response.status_code == 401


@pytest.mark.timeout(20)
def test_token_expires_after_ttl(tls_ttl_sim: SimServer) -> None:
    """A token stops working once its expires_in has passed."""
    assert tls_ttl_sim.ca_bundle is not None
    ctx = ssl.create_default_context(cafile=tls_ttl_sim.ca_bundle)
    with httpx.Client(base_url=tls_ttl_sim.url, verify=ctx) as client:
        creds = tls_ttl_sim.credentials
        form = {"grant_type": "password", "client_id": "zerto-client"}
        form |= {"username": creds["username"], "password": creds["password"]}
        body = client.post(TOKEN, data=form).json()
        assert body["expires_in"] == 1
        headers = {"Authorization": f"Bearer {body['access_token']}"}
        assert client.get("/v1/localsite", headers=headers).status_code == 200
        time.sleep(1.1)
        assert client.get("/v1/localsite", headers=headers).status_code == 401


@pytest.fixture
def tls_ttl_sim() -> Iterator[SimServer]:
    """A simulator whose tokens live one second, with fixed credentials."""
    config = SimConfig(token_ttl_s=1, client_secret="s3cret", password="pw")
    with SimServer(config) as server:
        assert server.credentials["password"] == "pw"
        yield server
