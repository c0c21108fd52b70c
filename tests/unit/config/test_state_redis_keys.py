"""state.url needs authentication kept out of the config file, unless explicitly waived."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from support.config import write_config
from zerto_rewind.config import Settings, load_settings
from zerto_rewind.errors import ConfigError
from zerto_rewind.zvm.redis_conn import redacted_url

ZVM = {"url": "https://127.0.0.1:9", "client_id": "rewind", "client_secret_env": "ZS"}
ENV = {"HOME": "/home/op", "ZS": "from-env", "ZR_REDIS_PW": "pw from env"}
URL = "redis://127.0.0.1:6379/0"


def load(directory: Path, state: dict[str, Any], env: dict[str, str] | None = None) -> Settings:
    path = write_config(directory, {"zvm": ZVM, "state": state})
    return load_settings(env or ENV, path=str(path))


def test_a_redis_without_a_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"url": URL})
    assert info.value.key == "state.url"
    assert "without authentication is refused" in str(info.value)
    assert "state.password_file" in str(info.value)


def test_the_waiver_lets_an_unauthenticated_redis_through(tmp_path: Path) -> None:
    settings = load(tmp_path, {"url": URL, "allow_unauthenticated_redis": True})
    assert settings.state_redis is not None
    assert settings.state_redis.allow_unauthenticated
    assert settings.state_connection_url() == URL


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@127.0.0.1:6379/0",
        "redis://zr:hunter2@h:1/0",
        "unix:///r.sock?password=hunter2",
    ],
)
def test_a_password_in_the_url_is_refused_without_quoting_it(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, {"url": url, "allow_unauthenticated_redis": True})
    assert info.value.key == "state.url"
    assert "does not belong in the config file" in str(info.value)
    assert "hunter2" not in str(info.value)


def test_the_password_from_the_environment_reaches_the_connection_only(tmp_path: Path) -> None:
    settings = load(tmp_path, {"url": "redis://zr@127.0.0.1:6379/0", "password_env": "ZR_REDIS_PW"})
    assert settings.state_url == "redis://zr@127.0.0.1:6379/0"
    connection = settings.state_connection_url(ENV)
    assert connection == "redis://zr@127.0.0.1:6379/0?password=pw+from+env"
    assert "pw" not in redacted_url(str(connection))
    with pytest.raises(ConfigError, match="ZR_REDIS_PW, which is empty or unset"):
        settings.state_connection_url({})


def test_the_password_file_must_be_private(tmp_path: Path) -> None:
    secret = tmp_path / "redis-password"
    secret.write_text("file-pw\n")
    os.chmod(secret, 0o600)
    settings = load(tmp_path, {"url": URL, "password_file": str(secret)})
    assert settings.state_connection_url() == f"{URL}?password=file-pw"
    os.chmod(secret, 0o644)
    with pytest.raises(ConfigError, match="readable by others") as info:
        settings.state_connection_url()
    assert "file-pw" not in str(info.value)


def test_tls_with_a_ca_bundle(tmp_path: Path) -> None:
    state = {"url": "rediss://zr@redis.example:6380/0", "password_env": "ZR_REDIS_PW"}
    settings = load(tmp_path, {**state, "ca_file": "ca.pem"})
    connection = str(settings.state_connection_url(ENV))
    assert f"ssl_ca_certs={str(tmp_path / 'ca.pem').replace('/', '%2F')}" in connection
    assert redacted_url(connection) == "rediss://zr@redis.example:6380/0"


@pytest.mark.parametrize(
    ("state", "key", "words"),
    [
        ({"url": URL, "password_env": "A", "password_file": "b"}, "state", "not both"),
        ({"url": URL, "password_env": "A", "ca_file": "ca.pem"}, "state.ca_file", "rediss://"),
        ({"password_env": "A"}, "state.password_env", "state.url is not set"),
        ({"url": URL, "allow_unauthenticated_redis": "yes"}, "state.allow_unauthenticated_redis",
         "true or false"),
        ({"url": URL, "password": "x"}, "state.password", ""),
    ],
)  # fmt: skip
def test_bad_state_keys_name_the_key(
    tmp_path: Path, state: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, state)
    assert info.value.key == key
    assert words in str(info.value)


def test_rediss_verifies_the_server_against_the_ca_bundle(tmp_path: Path) -> None:
    """The connection built from the settings: TLS, certificate and host name checked."""
    import ssl

    from zerto_rewind.zvm.redis_conn import connect

    state = {"url": "rediss://zr@redis.example:6380/0", "password_env": "ZR_REDIS_PW"}
    settings = load(tmp_path, {**state, "ca_file": "ca.pem"})
    client = connect(str(settings.state_connection_url(ENV)))
    connection = client.connection_pool.make_connection()
    assert connection.cert_reqs == ssl.CERT_REQUIRED
    assert connection.check_hostname is True
    assert connection.ca_certs == str(tmp_path / "ca.pem")
    assert connection.password == "pw from env"
    client.close()
